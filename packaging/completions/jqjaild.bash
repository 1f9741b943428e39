_jqjaild() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="jqjaild"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        jqjaild)
            opts="-h -V --socket --store --config --max-input-bytes --max-filter-bytes --max-depth --max-output-bytes --timeout-ms --max-heap-bytes --stack-bytes --cpu-seconds --cgroup-memory-bytes --worker-start --code-pages --prestart --max-concurrent --max-queue --idle-timeout-ms --frame-timeout-ms --drain-timeout-ms --max-connections --max-connections-per-uid --max-uploads-per-tenant --socket-mode --quota-bytes --max-age-secs --on-full --metrics-listen --metrics-tenant-labels --metrics-socket-mode --idle-exit-ms --isolation --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --store)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-input-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-filter-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-depth)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-output-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-heap-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stack-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cpu-seconds)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cgroup-memory-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --worker-start)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --code-pages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prestart)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-concurrent)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-queue)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --idle-timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --frame-timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --drain-timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-connections)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-connections-per-uid)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-uploads-per-tenant)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --socket-mode)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --quota-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-age-secs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --on-full)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-tenant-labels)
                    COMPREPLY=($(compgen -W "true false" -- "${cur}"))
                    return 0
                    ;;
                --metrics-socket-mode)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --idle-exit-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --isolation)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _jqjaild -o nosort -o bashdefault -o default jqjaild
else
    complete -F _jqjaild -o bashdefault -o default jqjaild
fi
