// What discovery reports of a few built-in resources (and a custom one), for unit tests that
// resolve kinds, owner kinds and every-kind entries without an API server.
import type { ApiResource } from '../resource.ts';

const VERBS = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];

export function resource(
  group: string,
  plural: string,
  kind: string,
  fields: Partial<ApiResource> = {},
): ApiResource {
  return {
    group,
    version: group === '' ? 'v1' : 'v1',
    resource: plural,
    singular: kind.toLowerCase(),
    kind,
    shortNames: [],
    namespaced: true,
    verbs: VERBS,
    preferred: true,
    ...fields,
  };
}

export const BUILTINS: readonly ApiResource[] = [
  resource('', 'configmaps', 'ConfigMap', { shortNames: ['cm'] }),
  resource('', 'secrets', 'Secret'),
  resource('', 'pods', 'Pod', { shortNames: ['po'] }),
  resource('', 'services', 'Service', { shortNames: ['svc'] }),
  resource('', 'namespaces', 'Namespace', { namespaced: false, shortNames: ['ns'] }),
  resource('', 'nodes', 'Node', { namespaced: false, shortNames: ['no'] }),
  resource('', 'replicationcontrollers', 'ReplicationController', { shortNames: ['rc'] }),
  resource('apps', 'deployments', 'Deployment', { shortNames: ['deploy'] }),
  resource('apps', 'replicasets', 'ReplicaSet', { shortNames: ['rs'] }),
  resource('apps', 'statefulsets', 'StatefulSet', { shortNames: ['sts'] }),
  resource('apps', 'daemonsets', 'DaemonSet', { shortNames: ['ds'] }),
  resource('apps', 'controllerrevisions', 'ControllerRevision'),
  resource('batch', 'jobs', 'Job'),
  resource('batch', 'cronjobs', 'CronJob', { shortNames: ['cj'] }),
];

/** A custom resource, as a CRD serves it. */
export const WIDGETS = resource('example.com', 'widgets', 'Widget');
