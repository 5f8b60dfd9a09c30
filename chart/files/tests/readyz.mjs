// helm test: labeller answers /readyz through the release's metrics Service. Run by the image's
// Node (node --input-type=module --eval); no shell, no dependency. Asked again every 2 s for
// DEADLINE_SECONDS, since a release just installed first lists its kinds; the last answer names
// what keeps it from being ready.
import process from 'node:process';

const url = process.env.READYZ_URL ?? '';
const deadline = Date.now() + Number(process.env.DEADLINE_SECONDS ?? '120') * 1000;
let last = '';
for (;;) {
  let answer;
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(5000) });
    const body = (await response.text()).trim();
    if (response.ok) {
      console.log(`GET ${url}: ${response.status}\n${body}`);
      process.exit(0);
    }
    answer = `${response.status}: ${body}`;
  } catch (error) {
    answer = String(error?.cause ?? error);
  }
  if (answer !== last) console.log(`GET ${url}: ${answer}`);
  last = answer;
  if (Date.now() >= deadline) break;
  await new Promise((resolve) => setTimeout(resolve, 2000));
}
console.error(`labeller is not ready: ${url} still answers ${last}`);
process.exit(1);
