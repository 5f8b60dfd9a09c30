// The completion scripts, read by the shells themselves: bash runs the completion function on
// command lines, fish answers `complete -C`, zsh parses the script and registers it with compinit.
// zsh and fish come from Debian's packages (.ci/run installs them).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { completionScript, SHELLS } from './completion.ts';
import { COMMANDS, SPECS } from './flags.ts';
import { UsageError } from '../util/usage.ts';

/** Runs `script` in `shell` with the completion script in $COMPLETION; returns stdout. */
function shellRun(shell: string, args: readonly string[], script: string, completion: string): string {
  const result = spawnSync(shell, [...args, script], {
    encoding: 'utf8',
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/', COMPLETION: completion },
  });
  if (result.error) {
    throw new Error(
      `${shell}: ${result.error.message}; install it (Debian: apt-get install -y ${shell}; .ci/run does)`,
    );
  }
  assert.equal(result.status, 0, `${shell} ${script}: ${result.stderr}`);
  return result.stdout;
}

describe('every script', () => {
  for (const shell of SHELLS) {
    test(`${shell}: mentions every option, short name, command and choice, and both command names`, () => {
      const script = completionScript([shell]);
      for (const [name, spec] of Object.entries(SPECS)) {
        assert.match(script, new RegExp(`(--|-l )${name}\\b`), `--${name}`);
        if ('short' in spec) assert.match(script, new RegExp(`(-|-s )${spec.short}\\b`), `-${spec.short}`);
        if ('choices' in spec) { for (const choice of spec.choices) assert.ok(script.includes(choice), choice); }
      }
      for (const command of [...Object.keys(COMMANDS), 'completion', ...SHELLS]) {
        assert.ok(script.includes(command), command);
      }
      assert.ok(script.includes('kubectl-labeller'));
    });
  }

  test('any other shell, or none, is a usage error naming the three', () => {
    for (const args of [[], ['powershell'], ['bash', 'zsh']]) {
      assert.throws(() => completionScript(args), (e: unknown) => {
        assert.ok(e instanceof UsageError);
        assert.match(e.message, /takes one shell: bash, zsh, fish/);
        return true;
      });
    }
  });
});

describe('bash', () => {
  const script = completionScript(['bash']);
  /** The words bash would offer for `line` (completing its last word; a trailing space starts a new one). */
  const complete = (line: string): string[] => {
    // bash splits at COMP_WORDBREAKS, '=' among them: `--conflicts=f` is three words.
    const words = line.replaceAll('=', ' = ').split(' ').filter((w, i, all) => w !== '' || i === all.length - 1);
    const out = shellRun(
      'bash',
      ['-c'],
      `source <(printf '%s' "$COMPLETION"); COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${
        words.length - 1
      }; _labeller 2>/dev/null; printf '%s\\n' "\${COMPREPLY[@]}"`,
      script,
    );
    return out.split('\n').filter(Boolean).sort();
  };

  test('commands first, then shells after completion', () => {
    assert.deepEqual(complete('labeller '), ['admission', 'completion', 'explain', 'prune', 'status']);
    assert.deepEqual(complete('labeller st'), ['status']);
    assert.deepEqual(complete('labeller completion '), ['bash', 'fish', 'zsh']);
    assert.deepEqual(complete('kubectl-labeller completion z'), ['zsh']);
  });

  test('options by prefix, before and after a command', () => {
    assert.deepEqual(complete('labeller --dry'), ['--dry-run']);
    assert.deepEqual(complete('labeller status --leader-elect-r'), [
      '--leader-elect-renew-deadline',
      '--leader-elect-resource-name',
      '--leader-elect-resource-namespace',
      '--leader-elect-retry-period',
    ]);
  });

  test("an option's choices, as --flag value and --flag=value; nothing for free values", () => {
    assert.deepEqual(complete('labeller --conflicts '), ['force', 'skip']);
    assert.deepEqual(complete('labeller status -o j'), ['json']);
    assert.deepEqual(complete('labeller admission -o y'), ['yaml']);
    assert.deepEqual(complete('labeller --log-format='), ['auto', 'json', 'text']);
    assert.deepEqual(complete('labeller --log-level=w'), ['warn']);
    assert.deepEqual(complete('labeller --kinds '), []);
    assert.deepEqual(complete('labeller -n '), []);
  });

  test('option values are not taken for the command: it comes after them', () => {
    assert.deepEqual(complete('labeller --kinds cm '), ['admission', 'completion', 'explain', 'prune', 'status']);
    assert.deepEqual(complete('labeller --conflicts=skip --events=false '), [
      'admission',
      'completion',
      'explain',
      'prune',
      'status',
    ]);
    assert.deepEqual(complete('labeller --dry-run prune '), []);
  });
});

test('fish: commands, options, choices and the kubectl plugin name', () => {
  const complete = (line: string): string[] =>
    shellRun('fish', ['-c'], `printf '%s' "$COMPLETION" | source; complete -C '${line}'`, completionScript(['fish']))
      .split('\n').filter(Boolean).map((l) => l.split('\t')[0]!).sort();
  assert.deepEqual(complete('labeller '), ['admission', 'completion', 'explain', 'prune', 'status']);
  assert.deepEqual(complete('labeller completion '), ['bash', 'fish', 'zsh']);
  assert.deepEqual(complete('labeller --conflicts '), ['force', 'skip']);
  assert.deepEqual(complete('labeller --dry'), ['--dry-run']);
  assert.deepEqual(complete('kubectl-labeller status --log-f'), ['--log-format']);
});

test('zsh: parses, and registers _labeller for both names with compinit', () => {
  const script = completionScript(['zsh']);
  shellRun('zsh', ['-n', '-c'], script, script);
  const registered = shellRun(
    'zsh',
    ['-f', '-c'],
    'autoload -U compinit && compinit -u -D && eval "$COMPLETION" && print -r -- $_comps[labeller] $_comps[kubectl-labeller]',
    script,
  );
  assert.equal(registered.trim(), '_labeller _labeller');
});
