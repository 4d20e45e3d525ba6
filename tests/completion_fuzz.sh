#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Randomized property test of shell completion (issue 18; a shell script, not a libFuzzer target):
# ROUNDS sysroots, each with device names of random bytes (any byte but NUL and '/') mixed with
# shell syntax ($(...), backticks, quotes, globs, newlines, $VAR, !, \, ;); completing devices in
# each must run nothing (no marker file appears) and offer every name as exactly one literal
# candidate: bash offers `printf %q NAME` for each, zsh hands compadd the names themselves (and,
# in zsh, the --sysroot directory's own name is random too, typed quoted as ${(q)...} writes it).
# Rounds alternate the C and C.UTF-8 locales (names are rarely valid UTF-8).
# Usage: completion_fuzz.sh SOURCE_DIR bash|zsh [ROUNDS [SEED]]. A failure prints the seed and the
# round: rerun with that seed to reproduce. Exit 77 (skipped) when the shell is missing.
set -u
source_dir=$1
shell=$2
rounds=${3:-40}
seed=${4:-$(( $(date +%s) % 32768 ))}
command -v "$shell" >/dev/null || { echo "$shell not installed: skipped"; exit 77; }
RANDOM=$seed

work=$(mktemp -d "${TMPDIR:-/tmp}/p2paudit-completion-fuzz.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
marker=$work/MARKER
failures=0
fail() { echo "FAIL (seed $seed, round $round, LC_ALL=$locale): $*"; failures=$((failures + 1)); }
show() { local x; for x in "$@"; do printf '%q\n' "$x"; done | LC_ALL=C sort; }

# Pieces a name is made of: a random byte (1..255 but '/') or a piece of shell syntax that would
# create $marker (in $work, where the shells run) if a shell evaluated it.
pieces=('$(touch MARKER)' '`touch MARKER`' '$(touch${IFS}MARKER)' "'" '"' $'\n' ' ' $'\t' '*' '?' '['
        ']' '\' '$HOME' '${PATH}' '!' '!!' ';touch MARKER;' '&' '|' '<' '>' '{a,b}' '~' '#' '%q' '-')
random_byte() {
  local b=$((RANDOM % 255 + 1))
  ((b == 47)) && b=48
  printf -v REPLY "\\x$(printf %02x "$b")"
}
random_name() {  # REPLY: "0000:" and up to 12 pieces (a leading dot would hide the name from *)
  local name=0000: n=$((RANDOM % 12 + 1)) i
  for ((i = 0; i < n; i++)); do
    if ((RANDOM % 2)); then random_byte; name+=$REPLY; else name+=${pieces[RANDOM % ${#pieces[@]}]}; fi
  done
  REPLY=$name
}

complete_bash() {  # $1: the line; prints COMPREPLY NUL-separated
  (cd "$work" && LC_ALL=$locale bash --norc --noprofile -c '
    source "$1" || exit 1
    COMP_LINE=$2; COMP_POINT=${#COMP_LINE}
    read -ra COMP_WORDS <<<"$COMP_LINE"; COMP_CWORD=${#COMP_WORDS[@]}
    [[ $COMP_LINE == *" " ]] || COMP_CWORD=$((COMP_CWORD - 1))
    _p2paudit
    printf "%s\0" "${COMPREPLY[@]}"' _ "$source_dir/completions/p2paudit.bash" "$1")
}
complete_zsh() {  # $1: the sysroot; prints what compadd is handed, NUL-separated
  (cd "$work" && LC_ALL=$locale zsh -f -c '
    fpath=("$1" $fpath); autoload -Uz _p2paudit
    _arguments() { return 1 }; _describe() { return 1 }
    compadd() { while (( $# )); do if [[ $1 == -a ]]; then print -rN -- "${(@P)2}"; shift 2; else shift; fi; done }
    _p2paudit 2>/dev/null
    typeset -A opt_args; opt_args[--sysroot]=${(q)2}  # the word as typed: quoted
    _p2paudit_devices' _ "$source_dir/completions" "$1")
}

locales=(C)
locale -a 2>/dev/null | grep -qix 'c.utf-\?8' && locales+=(C.UTF-8)
for ((round = 0; round < rounds; round++)); do
  locale=${locales[round % ${#locales[@]}]}
  root=$work/sysroot-$round
  if [[ $shell == zsh ]]; then  # zsh reads --sysroot as typed (quoted): a random directory name too
    random_name
    root+=-${REPLY#0000:}
  fi
  mkdir -p "$root/sys/bus/pci/devices"
  declare -A seen=()
  names=()
  for ((k = 0; k < 8; k++)); do
    random_name
    [[ -n ${seen[$REPLY]+x} ]] && continue
    seen[$REPLY]=1
    names+=("$REPLY")
    : >"$root/sys/bus/pci/devices/$REPLY" || fail "cannot create a file named $(printf %q "$REPLY")"
  done
  unset seen
  if [[ $shell == bash ]]; then
    mapfile -d '' got < <(complete_bash "p2paudit --sysroot $root check ")
    # The completion works bytewise (LC_ALL=C) whatever the user's locale: printf %q in C.
    mapfile -d '' expected < <(LC_ALL=C bash --norc --noprofile -c 'printf "%q\0" "$@"' _ "${names[@]}")
  else
    mapfile -d '' got < <(complete_zsh "$root")
    expected=("${names[@]}")
  fi
  [[ -e $marker ]] && { fail "completion ran a command from a device name"; rm -f -- "$marker"; }
  [[ $(show "${got[@]}") == "$(show "${expected[@]}")" ]] ||
    fail "offered: $(show "${got[@]}") expected: $(show "${expected[@]}")"
  rm -rf -- "$root"
done

if ((failures)); then echo "$failures failure(s) (seed $seed)"; exit 1; fi
echo "ok: $shell completion of $rounds random sysroots (seed $seed, locales ${locales[*]}) evaluated nothing and offered every name literally"
