// `labeller completion bash|zsh|fish`: a completion script for the shell, rendered from flags.ts
// like --help, so it cannot drift from the parser. It completes the commands, every option (not
// their former names), the values of options with choices, and file names for the file options;
// resource kinds and namespaces would need the cluster, and are left to the user. The scripts
// complete `kubectl-labeller` too, the name kubectl runs the plugin by.
// Not yargs's .completion(): its script starts labeller at every TAB (0.09 s from dist/, these
// answer in under a millisecond) and its answers are wrong here: command names where a value is
// due (--kinds, -n, --config, --log-format=), other commands after one, no file names, and for
// one program name only.
import { COMMANDS, COMPLETION, type Name, type Spec, SPECS } from './flags.ts';
import { UsageError } from '../util/usage.ts';

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];

/** The commands besides the default, with what each does, `completion` included. */
export const COMPLETED_COMMANDS: Readonly<Record<string, string>> = {
  ...COMMANDS,
  [COMPLETION.name]: COMPLETION.describe,
};

/** The options whose values are file names. */
const FILES: readonly Name[] = ['config', 'kubeconfig', 'sources-memory-key-file'];

const NAMES = ['labeller', 'kubectl-labeller'] as const;

/** The first clause of a description: enough beside a completion. */
const summary = (text: string): string => text.split(/; | \(/)[0]!.trim();

interface Option {
  readonly name: string;
  readonly spec: Spec;
  /** Takes a value (every kind but boolean). */
  readonly value: boolean;
  readonly files: boolean;
  readonly summary: string;
}

const OPTIONS: readonly Option[] = (Object.entries(SPECS) as [Name, Spec][]).map(([name, spec]) => ({
  name,
  spec,
  value: spec.kind !== 'boolean',
  files: FILES.includes(name),
  summary: summary(spec.describe),
}));

/** `--name` and `-x` of the options that take a value. */
const valueSwitches = (): string[] =>
  OPTIONS.filter((o) => o.value).flatMap((o) => [`--${o.name}`, ...(o.spec.short ? [`-${o.spec.short}`] : [])]);

function bash(): string {
  const switches = (o: Option): string => [`--${o.name}`, ...(o.spec.short ? [`-${o.spec.short}`] : [])].join('|');
  const cases = [
    ...OPTIONS.filter((o) => o.files).map((o) =>
      `    ${switches(o)}) compopt -o filenames; COMPREPLY=($(compgen -f -- "$cur")); return ;;`
    ),
    ...OPTIONS.filter((o) => o.spec.choices).map((o) =>
      `    ${switches(o)}) COMPREPLY=($(compgen -W '${o.spec.choices!.join(' ')}' -- "$cur")); return ;;`
    ),
    // Any other value (kinds, namespaces, durations…) is the user's to type.
    `    ${OPTIONS.filter((o) => o.value && !o.files && !o.spec.choices).map(switches).join('|')}) return ;;`,
  ];
  const flags = OPTIONS.flatMap((o) => [`--${o.name}`, ...(o.spec.short ? [`-${o.spec.short}`] : [])]);
  return `# bash completion for ${NAMES.join(' and ')}: \`labeller completion bash\` prints it.
#   source <(labeller completion bash)        in ~/.bashrc, or save it in
#   ~/.local/share/bash-completion/completions/labeller
_labeller() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="" i word command=""
  ((COMP_CWORD > 0)) && prev="\${COMP_WORDS[COMP_CWORD-1]}"
  # bash splits --flag=value at the '=': complete the value of the flag before it.
  if [[ "$cur" == "=" ]]; then
    prev="\${COMP_WORDS[COMP_CWORD-1]}" cur=""
  elif [[ "$prev" == "=" ]] && ((COMP_CWORD > 1)); then
    prev="\${COMP_WORDS[COMP_CWORD-2]}"
  fi
  COMPREPLY=()
  case "$prev" in
${cases.join('\n')}
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W '${flags.join(' ')} --help --version' -- "$cur"))
    return
  fi
  # The command is the first word that is neither an option nor an option's value.
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    case "$word" in
      =) ((i++)) ;; # --flag=value, split at the '=': skip the value
      ${valueSwitches().join('|')}) [[ "\${COMP_WORDS[i+1]}" == "=" ]] || ((i++)) ;;
      -*) ;;
      *) command="$word"; break ;;
    esac
  done
  case "$command" in
    "") COMPREPLY=($(compgen -W '${Object.keys(COMPLETED_COMMANDS).join(' ')}' -- "$cur")) ;;
    ${COMPLETION.name}) COMPREPLY=($(compgen -W '${SHELLS.join(' ')}' -- "$cur")) ;;
  esac
}
complete -F _labeller ${NAMES.join(' ')}
`;
}

/** Text inside single quotes in zsh and inside an _arguments [description]. */
const zshDescription = (text: string): string =>
  text.replaceAll('\\', '\\\\').replaceAll('[', '\\[').replaceAll(']', '\\]').replaceAll(':', '\\:').replaceAll(
    "'",
    "'\\''",
  );

function zsh(): string {
  const specs = OPTIONS.map((o) => {
    const action = o.files
      ? ':file:_files'
      : o.spec.choices
      ? `:${o.name}:(${o.spec.choices.join(' ')})`
      : o.value
      ? `:${o.name}: `
      : '';
    const description = `[${zshDescription(o.summary)}]${action}`;
    return o.spec.short
      ? `'(-${o.spec.short} --${o.name})'{-${o.spec.short},--${o.name}}'${description}'`
      : `'--${o.name}${description}'`;
  });
  const commands = Object.entries(COMPLETED_COMMANDS).map(([name, what]) =>
    `'${name}:${zshDescription(summary(what))}'`
  );
  return `#compdef ${NAMES.join(' ')}
# zsh completion for ${NAMES.join(' and ')}: \`labeller completion zsh\` prints it.
#   source <(labeller completion zsh)         in ~/.zshrc (after compinit), or save it as _labeller
#   in a folder on $fpath
_labeller() {
  local context state state_descr line
  typeset -A opt_args
  local -a commands=(
    ${commands.join('\n    ')}
  )
  _arguments -s -S \\
    ${specs.join(' \\\n    ')} \\
    '(- *)'{-h,--help}'[show the help]' \\
    '(- *)--version[show the version]' \\
    '1:command:->command' \\
    '2:shell:->shell'
  case $state in
    command) _describe -t commands 'labeller command' commands ;;
    shell) [[ $line[1] == ${COMPLETION.name} ]] && _values shell ${SHELLS.join(' ')} ;;
  esac
}
if [[ "\${funcstack[1]}" == _labeller ]]; then
  _labeller "$@"
else
  compdef _labeller ${NAMES.join(' ')}
fi
`;
}

/** Text inside single quotes in fish. */
const fishQuote = (text: string): string => `'${text.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;

function fish(): string {
  const lines = OPTIONS.map((o) => {
    const parts = ['complete -c labeller', ...(o.spec.short ? [`-s ${o.spec.short}`] : []), `-l ${o.name}`];
    if (o.files) parts.push('-r -F');
    else if (o.spec.choices) parts.push(`-x -a ${fishQuote(o.spec.choices.join(' '))}`);
    else if (o.value) parts.push('-x');
    parts.push(`-d ${fishQuote(o.summary)}`);
    return parts.join(' ');
  });
  const commands = Object.entries(COMPLETED_COMMANDS).map(([name, what]) =>
    `complete -c labeller -n __fish_use_subcommand -a ${name} -d ${fishQuote(summary(what))}`
  );
  return `# fish completion for ${NAMES.join(' and ')}: \`labeller completion fish\` prints it.
#   labeller completion fish > ~/.config/fish/completions/labeller.fish
complete -c labeller -f
${commands.join('\n')}
complete -c labeller -n '__fish_seen_subcommand_from ${COMPLETION.name}' -a ${fishQuote(SHELLS.join(' '))}
${lines.join('\n')}
complete -c labeller -s h -l help -d 'show the help'
complete -c labeller -l version -d 'show the version'
complete -c kubectl-labeller -w labeller
`;
}

const SCRIPTS: Readonly<Record<Shell, () => string>> = { bash, zsh, fish };

/** The script for `labeller completion <shell>`; `args` are the words after `completion`. */
export function completionScript(args: readonly string[]): string {
  const [shell, ...rest] = args;
  if (shell === undefined || !(SHELLS as readonly string[]).includes(shell) || rest.length > 0) {
    throw new UsageError(
      `labeller ${COMPLETION.name} takes one shell: ${SHELLS.join(', ')} (e.g. source <(labeller completion bash))`,
    );
  }
  return SCRIPTS[shell as Shell]();
}
