// `labeller admission [-o yaml|json]`: the config as MutatingAdmissionPolicies and their bindings,
// and, where it protects keys, ValidatingAdmissionPolicies and theirs, printed to commit beside
// the controller. The protecting policies let the identity that renders them (as the API server
// knows it) and the config's protect.allow change the keys they protect: render them as the
// identity labeller runs as, or allow it in the config. The kinds are resolved through discovery as the
// controller resolves them; nothing is written. stdout holds only the objects (YAML documents,
// or a v1 List); the rules left to the controller are logged on stderr, and, in JSON, listed in
// the List's `controllerRules` too, so that a program reading the output has it all in one
// document.
import { dump } from 'js-yaml';
import type { Admission, ControllerRule } from '../admission/policy.ts';
import { type Config, protectsKeys } from '../config/model.ts';
import { whoAmI } from '../kube/access.ts';
import { renderPolicies } from '../policies/render.ts';
import type { Ending, Host } from './host.ts';

export interface AdmissionOptions {
  readonly output: 'yaml' | 'json';
  readonly fieldManager: string;
}

/** The document `labeller admission -o json` prints: a List `kubectl apply -f` takes, with the rules left to the controller. */
export interface AdmissionList {
  readonly apiVersion: 'v1';
  readonly kind: 'List';
  readonly items: Admission['objects'];
  readonly controllerRules: readonly ControllerRule[];
}

export async function runAdmission(host: Host, config: Config, options: AdmissionOptions): Promise<Ending> {
  const { log } = host;
  const protects = protectsKeys(config);
  const identity = protects ? await whoAmI(host.client, host.shutdown.intake) : undefined;
  if (protects) {
    if (identity === undefined) {
      log.warn(
        'keys not protected: the API server does not say who this is (SelfSubjectReview), and a protecting policy must let labeller change what it protects',
      );
    } else {
      log.info(
        "protected keys may be changed by this identity and the config's protect.allow only: render as the identity labeller runs as, or allow it",
        {
          identity,
          allow: config.protectAllow,
        },
      );
    }
  }
  const { admission, unknown, unmatched } = renderPolicies(config, host.discovery, options.fieldManager, identity);
  for (const { kind, error } of unknown) {
    log.warn('kind not served: no policy rendered for it; render again once it is served', {
      entry: kind.where,
      kind: kind.resource,
      error,
    });
  }
  for (const name of unmatched) {
    log.warn('excluded kind not served by the API server (yet): the every-kind policy does not leave it out', {
      kind: name,
      entry: config.everyKind?.kind.where,
    });
  }
  for (const rule of admission.controllerRules) log.info('left to the controller', { ...rule });
  const list: AdmissionList = {
    apiVersion: 'v1',
    kind: 'List',
    items: admission.objects,
    controllerRules: admission.controllerRules,
  };
  process.stdout.write(
    options.output === 'json'
      ? `${JSON.stringify(list, null, 2)}\n`
      : admission.objects.map((object) => `---\n${dump(object, { lineWidth: -1, noRefs: true })}`).join(''),
  );
  return 'done';
}
