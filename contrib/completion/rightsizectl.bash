# SPDX-License-Identifier: LGPL-2.1-or-later
# bash completion for rightsizectl(1). Installed as rightsizectl in bash-completion's completions
# directory; it needs nothing of bash-completion itself.
#
# The commands, options and policy names come from rightsizectl (hidden --list-verbs,
# --list-options, --list-policies: no second list to keep in step), the guest names from the
# daemon through `rightsizectl list --name`, quietly and under a short timeout: a daemon that is
# not running or a bus that hangs costs a TAB at most RIGHTSIZECTL_COMPLETION_TIMEOUT seconds
# (default 2) and offers no names.

__rightsizectl_quietly() { # command args...
        # stdin from /dev/null: no polkit agent prompt, and the non-interactive call timeout.
        if command -v timeout >/dev/null 2>&1; then
                timeout "${RIGHTSIZECTL_COMPLETION_TIMEOUT:-2}" "$@" </dev/null 2>/dev/null
        else
                command "$@" </dev/null 2>/dev/null
        fi
}

__rightsizectl() {
        __rightsizectl_quietly rightsizectl "$@"
}

# The libvirt domains rightsized does not manage yet, for `enable`: virsh's (its default URI, as
# LIBVIRT_DEFAULT_URI or root's qemu:///system say) without the guests rightsized lists.
__rightsizectl_unmanaged_domains() {
        local domains managed d
        domains=$(__rightsizectl_quietly virsh -q list --all --name)
        managed=$'\n'$(__rightsizectl list --name)$'\n'
        while IFS= read -r d; do
                [[ -n $d && $managed != *$'\n'"$d"$'\n'* ]] && printf '%s\n' "$d"
        done <<<"$domains"
}

# COMPREPLY from newline-separated words that start with the word being completed. The words are
# whole ("--json=short", "policy=balanced"); when bash split the word at its '=' (COMP_WORDBREAKS),
# what it replaces is the part after the '=', and so is the reply. A guest name may hold blanks
# or quotes: the reply is quoted for the shell (printf %q), unless the word was begun with a quote,
# and the typed word is compared without its opening quote and backslashes.
__rightsizectl_reply() { # words
        local IFS=$'\n' w strip="" typed=$cur quoted=""
        [[ $COMP_WORDBREAKS == *=* && $cur == *=* ]] && strip=${cur%=*}=
        if [[ $typed == [\"\']* ]]; then
                quoted=1
                typed=${typed:1}
        fi
        typed=${typed//\\/}
        COMPREPLY=()
        for w in $1; do
                [[ $w == "$typed"* ]] || continue
                w=${w#"$strip"}
                [[ -n $quoted ]] || printf -v w %q "$w"
                COMPREPLY+=("$w")
        done
}

_rightsizectl() {
        local -a words=()
        local cur prev i w cword=0 verb="" n_args=0 skip_next=0

        # The words as typed: "--json" "=" "short" and "policy" "=" "" are put back together.
        for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do
                w=${COMP_WORDS[i]}
                if ((i > 0)) && [[ $w == "=" || ${COMP_WORDS[i-1]} == "=" ]]; then
                        words[${#words[@]}-1]+=$w
                else
                        words+=("$w")
                fi
                ((i == COMP_CWORD)) && cword=$((${#words[@]} - 1))
        done
        cur=${words[cword]}
        prev=${words[cword-1]}

        if [[ $cur == --json=* ]]; then
                __rightsizectl_reply $'--json=pretty\n--json=short'
                return 0
        fi
        if [[ $prev == --policy || $prev == -p ]]; then
                __rightsizectl_reply "$(__rightsizectl --list-policies)"
                return 0
        fi
        if [[ $cur == --policy=* ]]; then
                __rightsizectl_reply "$(__rightsizectl --list-policies | sed 's/^/--policy=/')"
                return 0
        fi

        # The command, and how many of its arguments come before the word being completed.
        for ((i = 1; i < cword; i++)); do
                w=${words[i]}
                if ((skip_next)); then
                        skip_next=0
                        continue
                fi
                case $w in
                --policy | -p) skip_next=1 ;;
                -*) ;;
                *)
                        if [[ -z $verb ]]; then
                                verb=$w
                        else
                                n_args=$((n_args + 1))
                        fi
                        ;;
                esac
        done

        if [[ $cur == -* ]]; then
                __rightsizectl_reply "$(__rightsizectl --list-options)"
                # an option that takes a value: no space after its "="
                if [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *= ]]; then
                        compopt -o nospace 2>/dev/null
                fi
                return 0
        fi
        if [[ -z $verb ]]; then
                __rightsizectl_reply "$(__rightsizectl --list-verbs)"
                return 0
        fi

        case $verb in
        show | history | probe | pause | resume | disable | monitor | recommend)
                ((n_args == 0)) && __rightsizectl_reply "$(__rightsizectl list --name)"
                ;;
        enable)
                ((n_args == 0)) && __rightsizectl_reply "$(__rightsizectl_unmanaged_domains)"
                ;;
        set)
                if ((n_args == 0)); then
                        __rightsizectl_reply "$(__rightsizectl list --name)"
                elif ((n_args == 1)); then
                        if [[ $cur == policy=* ]]; then
                                __rightsizectl_reply "$(__rightsizectl --list-policies | sed 's/^/policy=/')"
                        else
                                __rightsizectl_reply $'policy=\nfloor=\nmax='
                                compopt -o nospace 2>/dev/null
                        fi
                fi
                ;;
        esac
        return 0
}

complete -F _rightsizectl rightsizectl
