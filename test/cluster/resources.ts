// The API resources tests talk to directly (MetadataApi without discovery), as discovery reports them.
import type { ApiResource } from '../../src/apimachinery/resource.ts';

export const CONFIGMAPS: ApiResource = {
  group: '',
  version: 'v1',
  resource: 'configmaps',
  singular: 'configmap',
  kind: 'ConfigMap',
  shortNames: ['cm'],
  namespaced: true,
  verbs: ['get', 'list', 'watch', 'patch'],
  preferred: true,
};

export const DEPLOYMENTS: ApiResource = {
  group: 'apps',
  version: 'v1',
  resource: 'deployments',
  singular: 'deployment',
  kind: 'Deployment',
  shortNames: ['deploy'],
  namespaced: true,
  verbs: ['get', 'list', 'watch', 'patch'],
  preferred: true,
};
