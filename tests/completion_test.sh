#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Shell completion never evaluates data (issue 18, docs/security.md): inside a sysroot whose
# device and file names hold $(...), backticks, quotes, spaces and newlines, completing runs
# nothing (no marker file appears) and offers each name literally, as one candidate.
# Usage: completion_test.sh SOURCE_DIR bash|zsh. Exit 77 (skipped) when the shell is missing.
set -u
source_dir=$1
shell=$2
command -v "$shell" >/dev/null || { echo "$shell not installed: skipped"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/p2paudit-completion.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
marker=$work/MARKER
root=$work/sysroot
mkdir -p "$root/sys/bus/pci/devices"
# The hostile names: each would create $marker if a shell evaluated it.
# The shells run in $work, so `touch MARKER` there creates $marker (a name holds no slash).
device_names=(
  "0000:00:01.0"
  "0000:\$(touch MARKER)"
  "0000:\`touch MARKER\`"
  "0000:\$(touch\${IFS}MARKER)x"
  "0000:a'b\"c"
  "0000:a b"
  $'0000:new\nline'
  "0000:;touch MARKER;\$HOME"
  "0000:*"
)
for n in "${device_names[@]}"; do : >"$root/sys/bus/pci/devices/$n" || exit 1; done

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Sorted, NUL-separated, printable form of an array for comparison.
show() { local x; for x in "$@"; do printf '%q\n' "$x"; done | LC_ALL=C sort; }

if [[ $shell == bash ]]; then
  # Completes $1 (cursor at the end) as bash's programmable completion would call _p2paudit, and
  # prints COMPREPLY NUL-separated.
  complete_bash() {
    (cd "$work" && bash --norc --noprofile -c '
      source "$1" || exit 1
      COMP_LINE=$2; COMP_POINT=${#COMP_LINE}
      read -ra COMP_WORDS <<<"$COMP_LINE"; COMP_CWORD=${#COMP_WORDS[@]}
      [[ $COMP_LINE == *" " ]] || COMP_CWORD=$((COMP_CWORD - 1))
      _p2paudit
      printf "%s\0" "${COMPREPLY[@]}"' _ "$source_dir/completions/p2paudit.bash" "$1")
  }
  for line in "p2paudit --sysroot $root check " "p2paudit --sysroot=$root explain " \
              "p2paudit --sysroot $root check 0000:00:01.0 " "p2paudit --sysroot $root --assume-acs-off "; do
    mapfile -d '' got < <(complete_bash "$line")
    [[ -e $marker ]] && fail "completing '$line' ran a command from a device name"
    expected=()
    [[ $line == *--assume-acs-off* ]] && expected+=(all)
    # Each device, quoted as one shell word (printf %q).
    for n in "${device_names[@]}"; do printf -v q '%q' "$n"; expected+=("$q"); done
    [[ $(show "${got[@]}") == "$(show "${expected[@]}")" ]] ||
      fail "completing '$line' offered: $(show "${got[@]}") expected: $(show "${expected[@]}")"
    # What bash would insert reads back, as shell words, as exactly the literal name.
    for q in "${got[@]}"; do
      [[ $q == all ]] && continue
      [[ $q == *'$('* && $q != *'\$\('* ]] && fail "unquoted command substitution offered: $q"
    done
  done
  # A prefix typed by the user is matched literally, never as a pattern.
  mapfile -d '' got < <(complete_bash "p2paudit --sysroot $root check 0000:a")
  [[ $(show "${got[@]}") == "$(show "a\\ b" "a\\'b\\\"c")" ]] || fail "prefix 0000:a offered: $(show "${got[@]}")"
  [[ -e $marker ]] && fail "completing a prefix ran a command"

  # File names (aggregate's inputs, --sysroot's value): each one candidate, literal (bash
  # quotes them itself under -o filenames), none evaluated.
  files=$work/files
  mkdir -p "$files"
  for n in "${device_names[@]}"; do : >"$files/r-${n#0000:}"; done
  for line in "p2paudit aggregate files/r-" "p2paudit --sysroot files/r-"; do
    mapfile -d '' got < <(complete_bash "$line")
    [[ -e $marker ]] && fail "completing '$line' ran a command from a file name"
    expected=()
    for n in "${device_names[@]}"; do expected+=("files/r-${n#0000:}"); done
    [[ $(show "${got[@]}") == "$(show "${expected[@]}")" ]] ||
      fail "completing '$line' offered: $(show "${got[@]}") expected: $(show "${expected[@]}")"
  done
else
  # zsh: the completion's device function is run with compadd, _arguments and _describe
  # stubbed (compsys needs a terminal): compadd records the candidates it is handed.
  (cd "$work" && zsh -f -c '
    fpath=("$1" $fpath)
    autoload -Uz _p2paudit
    _arguments() { return 1 }
    _describe() { return 1 }
    compadd() {
      while (( $# )); do
        if [[ $1 == -a ]]; then print -rN -- "${(@P)2}"; shift 2; else shift; fi
      done
    }
    _p2paudit 2>/dev/null
    typeset -A opt_args
    opt_args[--sysroot]=$2
    _p2paudit_devices' _ "$source_dir/completions" "$root") >"$work/zsh.out"
  [[ -e $marker ]] && fail "zsh completion ran a command from a device name"
  mapfile -d '' got <"$work/zsh.out"
  [[ $(show "${got[@]}") == "$(show "${device_names[@]}")" ]] ||
    fail "zsh offered: $(show "${got[@]}") expected: $(show "${device_names[@]}")"
  # A --sysroot typed with shell quoting (a space escaped) is dequoted, never evaluated.
  spaced="$work/a dir"
  mkdir -p "$spaced/sys/bus/pci/devices" && : >"$spaced/sys/bus/pci/devices/0000:3b:00.0"
  (cd "$work" && zsh -f -c '
    fpath=("$1" $fpath); autoload -Uz _p2paudit
    _arguments() { return 1 }; _describe() { return 1 }
    compadd() { while (( $# )); do if [[ $1 == -a ]]; then print -rN -- "${(@P)2}"; shift 2; else shift; fi; done }
    _p2paudit 2>/dev/null
    typeset -A opt_args; opt_args[--sysroot]=${2// /\\ }
    _p2paudit_devices' _ "$source_dir/completions" "$spaced") >"$work/zsh.out"
  mapfile -d '' got <"$work/zsh.out"
  [[ $(show "${got[@]}") == "$(show 0000:3b:00.0)" ]] || fail "zsh: an escaped --sysroot offered: $(show "${got[@]}")"
fi

if ((failures)); then echo "$failures failure(s)"; exit 1; fi
echo "ok: $shell completion evaluated nothing and offered every name literally"
