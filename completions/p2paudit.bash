# SPDX-License-Identifier: GPL-2.0-or-later
# bash completion for p2paudit(1); installed as share/bash-completion/completions/p2paudit.
# The commands and options are those of tools/p2paudit/usage.txt (`p2paudit --help`);
# tests/cli_usage_test.cpp checks both lists against the binary. Needs bash only.

_p2paudit_commands='topology snapshot matrix explain policy check probe whitelist report aggregate log watch rules'
_p2paudit_global_options='--sysroot --lspci-dump --dump-cpu --dump-iommu --dump-host-bridge --format
  --verbose -v --color --kernel --kernel-rules --assume-whitelisted --assume-acs-off --diff --rules-dir --no-probe --no-cache --refresh
  --help -h --help-all --version'
# Options whose value is the next word.
_p2paudit_valued_options='--sysroot --lspci-dump --dump-cpu --dump-iommu --dump-host-bridge --format
  --color --kernel --kernel-rules --assume-whitelisted --assume-acs-off --rules-dir -o --output --size
  --repeat --timeout --jobs --rules --vendor-facts --require --fail-on --merge --gpus --from --seconds --log'

_p2paudit_command_options() {
  local rule_options='--rules --no-default-rules --vendor-facts --no-probe'
  case $1 in
    snapshot) echo '-o --output --redact --force --probe --copy --mirror --size --repeat --timeout --with-log' ;;
    matrix) echo '--all --details' ;;
    policy) echo "--all --details --fail-on --gpus $rule_options" ;;
    check) echo "--require $rule_options" ;;
    probe) echo '--copy --size --repeat --thorough --mirror --timeout' ;;
    whitelist) echo '--all --commit-message --vendor-facts --no-probe --patch --candidate --kernel-source --force --log' ;;
    report) echo '-o --output --force --redact --no-probe --all-pairs' ;;
    aggregate) echo '--merge --partial --format --jobs -o --output --force' ;;
    log) echo "--from --since-boot -o --output --force $rule_options" ;;
    watch) echo "--seconds -o --output --force $rule_options" ;;
    'rules lint') echo '--no-default-rules --strict --werror' ;;
    'rules facts') echo '--markdown' ;;
  esac
}

# Nothing read from the disk is ever handed to `compgen -W`, `eval` or an unquoted expansion: a
# snapshot's file names are a stranger's data (`$(...)`, backticks, quotes, newlines). Candidates
# are matched as literal strings and offered quoted with `printf %q`, so what bash inserts is
# that name as one word (docs/security.md). All of it runs in the C locale: bash 5.2 under a
# UTF-8 locale rewrites a name in ${name##*/} when a backslash sits inside an invalid multibyte
# sequence (bytes D1 '\' 81 come out as '\' D1 81), so the name offered would not be the file's.

# Offers each of the arguments that starts with $cur (as typed, or as its quoted form).
_p2paudit_offer() {
  local candidate quoted
  for candidate in "$@"; do
    printf -v quoted '%q' "$candidate"
    [[ $candidate == "$cur"* || $quoted == "$cur"* ]] && COMPREPLY+=("$quoted")
  done
  return 0
}

# The functions of the machine being completed for ($1: the --sysroot directory, else /), in
# the array _p2paudit_device_names; a pathname expansion, never a command's output split.
_p2paudit_devices() {
  local entry
  _p2paudit_device_names=()
  for entry in "${1%/}"/sys/bus/pci/devices/*; do
    [[ -e $entry || -L $entry ]] && _p2paudit_device_names+=("${entry##*/}")
  done
  return 0
}

_p2paudit_words() {  # $1: fixed candidates of this file, split at whitespace; $cur: the word
  local -a list
  read -ra list -d '' <<<"$1"
  _p2paudit_offer "${list[@]}"
}

_p2paudit_files() {  # $1: -f (files and directories) or -d
  # -o filenames: bash itself quotes what it inserts. The names come from a pathname expansion of
  # $cur taken literally (never `compgen` output split at newlines), so each is one candidate.
  compopt -o filenames 2>/dev/null
  local pattern=$cur prefix= entry
  if [[ $pattern == "~" || $pattern == "~/"* ]]; then  # ~/: $HOME, as bash would expand it
    prefix="~"
    pattern=$HOME${pattern#"~"}
  fi
  local had_nullglob=
  shopt -q nullglob && had_nullglob=1
  shopt -s nullglob
  for entry in "$pattern"*; do  # a leading . in $cur matches hidden names, as compgen -f does
    [[ $1 == -d && ! -d $entry ]] && continue
    [[ -n $prefix ]] && entry=$prefix${entry#"$HOME"}
    COMPREPLY+=("$entry")
  done
  [[ -n $had_nullglob ]] || shopt -u nullglob
  return 0
}

_p2paudit() {
  local LC_ALL=C  # bytes, never characters (see above); restored when the function returns
  # The words from the line itself: COMP_WORDS splits BDFs and VVVV:DDDD at their colons.
  local -a words
  if [[ -n ${COMP_LINE-} ]]; then
    local line=${COMP_LINE:0:COMP_POINT}
    read -ra words <<<"$line"
    [[ -z $line || $line == *[[:space:]] ]] && words+=('')
  else
    words=("${COMP_WORDS[@]:0:COMP_CWORD+1}")
  fi
  local cur=${words[-1]} prev=
  ((${#words[@]} > 1)) && prev=${words[-2]}
  local typed=$cur  # what bash will replace, less the part before its last word break

  local i word command= sysroot=/ after_separator=
  for ((i = 1; i < ${#words[@]} - 1; i++)); do
    word=${words[i]}
    if [[ -z $after_separator && $word == -* ]]; then
      [[ $word == -- ]] && after_separator=1
      [[ $word == --sysroot=* ]] && sysroot=${word#--sysroot=}
      if [[ " ${_p2paudit_valued_options//$'\n'/ } " == *" $word "* ]]; then
        [[ $word == --sysroot ]] && sysroot=${words[i + 1]}
        ((i++))
      fi
    elif [[ -z $command ]]; then
      command=$word
    elif [[ $command == rules && ( $word == lint || $word == facts ) ]]; then
      command="rules $word"
    fi
  done

  if [[ $cur == --*=* ]]; then
    prev=${cur%%=*}
    cur=${cur#*=}
  fi
  COMPREPLY=()
  case $prev in
    --format)
      if [[ $command == aggregate ]]; then _p2paudit_words 'text json csv csv-wide'
      else _p2paudit_words 'text json env dot html prom'; fi ;;
    --color) _p2paudit_words 'auto always never' ;;
    --dump-iommu) _p2paudit_words 'off passthrough translated' ;;
    --require) _p2paudit_words 'peer host_staged' ;;
    --fail-on) _p2paudit_words 'host_staged deny' ;;
    --assume-acs-off)
      local -a _p2paudit_device_names
      _p2paudit_devices "$sysroot"
      _p2paudit_offer all "${_p2paudit_device_names[@]}" ;;
    --sysroot | --lspci-dump | --kernel-rules | --rules | --vendor-facts | -o | --output | --merge | --patch) _p2paudit_files -f ;;
    --rules-dir | --kernel-source) _p2paudit_files -d ;;
    --dump-cpu | --dump-host-bridge | --kernel | --assume-whitelisted | --size | --repeat | --timeout | --jobs | --candidate | --gpus) ;;
    *)
      if [[ $cur == -* ]]; then
        _p2paudit_words "$_p2paudit_global_options $(_p2paudit_command_options "$command")"
      elif [[ -z $command ]]; then
        _p2paudit_words "$_p2paudit_commands"
      else
        case $command in
          rules) _p2paudit_words 'lint facts' ;;
          explain | check)
            local -a _p2paudit_device_names
            _p2paudit_devices "$sysroot"
            _p2paudit_offer "${_p2paudit_device_names[@]}" ;;
          aggregate | 'rules lint') _p2paudit_files -f ;;
        esac
      fi ;;
  esac

  # Bash replaces only what follows the word's last word-break character (: and = by default).
  if [[ -n ${COMP_LINE-} ]]; then
    for ((i = ${#typed} - 1; i >= 0; i--)); do
      [[ ${COMP_WORDBREAKS-} == *"${typed:i:1}"* ]] && break
    done
    if ((i >= 0)); then
      local before=${typed:0:i+1}
      COMPREPLY=("${COMPREPLY[@]#"$before"}")
    fi
  fi
}

complete -F _p2paudit p2paudit
