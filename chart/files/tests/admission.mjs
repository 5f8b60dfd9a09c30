// helm test: with admissionPolicies on, a server-side dry-run create of a probe object comes back
// carrying the labels labeller's MutatingAdmissionPolicies set: the API server runs them in the
// create and stores nothing. Run by the image's Node (node --input-type=module --eval) as the
// test's own ServiceAccount, with the token, CA and address the kubelet gives every pod.
//   PROBE             the object to create (JSON), PROBE_PATH where
//   EXPECTED_LABELS   the labels the policies must set on it (JSON)
//   MARKER            the annotation in which the policies list what they set: each entry must be on the object too
//   DEADLINE_SECONDS  how long to ask again while the policies are not in force yet (a release just installed)
import { readFileSync } from 'node:fs';
import process from 'node:process';

const ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';
const GROUP = '/apis/admissionregistration.k8s.io/v1';
const env = process.env;
const host = env.KUBERNETES_SERVICE_HOST ?? '';
const server = `https://${host.includes(':') ? `[${host}]` : host}:${env.KUBERNETES_SERVICE_PORT ?? '443'}`;
const probe = JSON.parse(env.PROBE ?? '{}');
const path = env.PROBE_PATH ?? '';
const expected = JSON.parse(env.EXPECTED_LABELS ?? '{}');
const marker = env.MARKER ?? '';
const deadline = Date.now() + Number(env.DEADLINE_SECONDS ?? '120') * 1000;
const what = `${probe.kind} ${probe.metadata?.namespace}/${probe.metadata?.name}`;
const shown = (labels) => Object.entries(labels).map(([k, v]) => `${k}=${v}`).join(', ') || 'none';

/** The API server's answer, parsed; `status` set when it is an error. */
async function request(method, url, body) {
  const token = readFileSync(`${ACCOUNT}/token`, 'utf8').trim();
  const response = await fetch(`${server}${url}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      accept: 'application/json',
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    body: body && JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = { message: text };
  }
  return response.ok ? parsed : { ...parsed, status: response.status };
}

/** The `key=value` entries of a marker (`!key=value`: forced over the request's value), as [key, value] pairs. */
function markerEntries(text = '') {
  return text.split(',').filter(Boolean).map((entry) => {
    const [key, ...value] = entry.replace(/^!/, '').split('=');
    return [key, value.join('=')];
  });
}

function fail(message) {
  console.error(message);
  process.exit(1);
}

// Kubernetes 1.36 and later serve MutatingAdmissionPolicies; before, labeller labels after the create.
const group = await request('GET', GROUP);
if (group.status === 404 || !group.resources?.some((r) => r.name === 'mutatingadmissionpolicies')) {
  if (group.status !== undefined && group.status !== 404) fail(`GET ${GROUP}: ${group.status} ${group.message}`);
  console.log('the API server does not serve MutatingAdmissionPolicies: labeller labels objects after their create');
  process.exit(0);
}

let last = '';
for (;;) {
  let created;
  try {
    created = await request('POST', `${path}?dryRun=All&fieldManager=labeller-helm-test`, probe);
  } catch (error) {
    created = { status: 0, message: String(error?.cause ?? error) };
  }
  let problem;
  if (created.status !== undefined) {
    problem = `${created.status} ${created.message}`;
    // Forbidden, invalid or already there: asking again changes nothing.
    if ([401, 403, 404, 409, 422].includes(created.status)) fail(`dry-run create of ${what}: ${problem}`);
  } else {
    const labels = created.metadata?.labels ?? {};
    const entries = markerEntries(created.metadata?.annotations?.[marker]);
    const missing = Object.entries(expected).filter(([key, value]) => labels[key] !== value);
    const unlike = entries.filter(([key, value]) => labels[key] !== value);
    if (missing.length === 0 && entries.length > 0 && unlike.length === 0) {
      console.log(
        `dry-run create of ${what}: labels ${shown(labels)}; labeller's policies set ${
          shown(Object.fromEntries(entries))
        }`,
      );
      process.exit(0);
    }
    problem = entries.length === 0
      ? `no labels set by labeller's policies (no ${marker} annotation); labels ${shown(labels)}`
      : `labels ${shown(labels)}, expected ${shown(expected)}; ${marker}: ${shown(Object.fromEntries(entries))}`;
  }
  if (problem !== last) console.log(`dry-run create of ${what}: ${problem}`);
  last = problem;
  if (Date.now() >= deadline) break;
  await new Promise((resolve) => setTimeout(resolve, 2000));
}
fail(
  `dry-run create of ${what}: ${last}. Are the policies in force (labeller status --admission-policies, labeller's log)?`,
);
