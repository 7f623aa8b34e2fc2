package cli

// The completion scripts ask "pysandboxes __complete" (see completeCommand) and
// only turn its answer into what each shell wants.

const bashCompletion = `# bash completion for pysandboxes (pysandboxes completion bash)
_pysandboxes() {
    local i words=() out lines=() line directive prefix strip value cur=${COMP_WORDS[COMP_CWORD]}
    # bash splits --rule=value at "=" (COMP_WORDBREAKS): join the pieces again.
    for ((i = 1; i <= COMP_CWORD; i++)); do
        if ((${#words[@]} > 0)) && [[ ${words[-1]} == -* && ( ${COMP_WORDS[i]} == "=" || ${words[-1]} == *= ) ]]; then
            words[-1]+=${COMP_WORDS[i]}
        else
            words+=("${COMP_WORDS[i]}")
        fi
    done
    out=$("${COMP_WORDS[0]}" __complete "${words[@]}" 2>/dev/null) || return
    mapfile -t lines <<<"$out"
    directive=${lines[-1]%%$'\t'*}
    prefix=${lines[-1]#*$'\t'}
    unset 'lines[-1]'
    # What bash replaces is its own last word: drop what comes before it.
    strip=${words[-1]%"$cur"}
    COMPREPLY=()
    case $directive in
    :files | :dirs)
        value=${words[-1]#"$prefix"}
        compopt -o filenames 2>/dev/null
        if [[ $directive == :dirs ]]; then
            mapfile -t lines < <(compgen -d -- "$value")
        else
            mapfile -t lines < <(compgen -f -- "$value")
        fi
        for line in "${lines[@]}"; do
            line=$prefix$line
            COMPREPLY+=("${line#"$strip"}")
        done
        ;;
    :commands)
        mapfile -t COMPREPLY < <(compgen -c -- "$cur")
        ;;
    *)
        for line in "${lines[@]}"; do
            line=${line%%$'\t'*}
            COMPREPLY+=("${line#"$strip"}")
        done
        if ((${#COMPREPLY[@]} == 1)) && [[ ${COMPREPLY[0]} == *= ]]; then
            compopt -o nospace 2>/dev/null
        fi
        ;;
    esac
}
complete -F _pysandboxes pysandboxes
`

const zshCompletion = `#compdef pysandboxes
# zsh completion for pysandboxes (pysandboxes completion zsh)
_pysandboxes() {
    local out directive prefix line value desc
    local -a lines cands nospace
    out=$("${words[1]}" __complete "${(@)words[2,CURRENT]}" 2>/dev/null) || return 1
    lines=("${(@f)out}")
    directive=${lines[-1]%%$'\t'*}
    prefix=${lines[-1]#*$'\t'}
    lines=("${(@)lines[1,-2]}")
    if [[ -n $prefix && $PREFIX == ${(b)prefix}* ]]; then
        IPREFIX+=$prefix
        PREFIX=${PREFIX#${(b)prefix}}
    fi
    case $directive in
    :files) _files ;;
    :dirs) _files -/ ;;
    :commands) _command_names -e ;;
    *)
        for line in "${lines[@]}"; do
            [[ -z $line ]] && continue
            value=${line%%$'\t'*}
            desc=
            [[ $line == *$'\t'* ]] && desc=${line#*$'\t'}
            value=${value//:/\\:}
            if [[ $value == *= ]]; then
                nospace+=("$value${desc:+:$desc}")
            else
                cands+=("$value${desc:+:$desc}")
            fi
        done
        (( ${#cands} )) && _describe -t values 'pysandboxes' cands
        (( ${#nospace} )) && _describe -t rules 'pysandboxes' nospace -S ''
        ;;
    esac
}
if [[ $funcstack[1] == _pysandboxes ]]; then
    _pysandboxes "$@"
else
    compdef _pysandboxes pysandboxes
fi
`

const fishCompletion = `# fish completion for pysandboxes (pysandboxes completion fish)
function __pysandboxes_complete
    set -l tokens (commandline -opc)
    set -l cur (commandline -ct)
    set -l out (command $tokens[1] __complete $tokens[2..-1] "$cur" 2>/dev/null)
    or return
    set -l last (string split -m 1 \t -- $out[-1])
    set -e out[-1]
    set -l prefix $last[2]
    set -l value (string replace -- "$prefix" "" "$cur")
    switch $last[1]
        case :files
            printf '%s\n' $prefix(__fish_complete_path "$value")
        case :dirs
            printf '%s\n' $prefix(__fish_complete_directories "$value" "")
        case :commands
            __fish_complete_command
        case '*'
            printf '%s\n' $out
    end
end
complete -c pysandboxes -f -a '(__pysandboxes_complete)'
`
