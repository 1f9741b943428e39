complete -c jqjaild -l socket -d 'Path of the Unix socket to listen on' -r -F
complete -c jqjaild -l store -d 'Directory of the hide store (created 0700 if missing)' -r -F
complete -c jqjaild -l config -d 'TOML configuration file; flags override it' -r -F
complete -c jqjaild -l max-input-bytes -d 'Largest inline input, bytes' -r
complete -c jqjaild -l max-filter-bytes -d 'Longest filter, bytes' -r
complete -c jqjaild -l max-depth -d 'Deepest input nesting' -r
complete -c jqjaild -l max-output-bytes -d 'Largest output text, bytes' -r
complete -c jqjaild -l timeout-ms -d 'Wall-clock limit per request, milliseconds' -r
complete -c jqjaild -l max-heap-bytes -d 'Heap allowance per worker above its baseline, bytes' -r
complete -c jqjaild -l stack-bytes -d 'Worker stack size, bytes' -r
complete -c jqjaild -l cpu-seconds -d 'Worker CPU-time limit, seconds' -r
complete -c jqjaild -l cgroup-memory-bytes -d 'Per-worker memory cgroup limit, bytes (0: no cgroup; default heap + stack + 64 MiB)' -r
complete -c jqjaild -l worker-start -d 'How workers are started: `zygote` (forked by a zygote exec\'d once; the default) or `exec` (each worker exec\'d)' -r
complete -c jqjaild -l code-pages -d 'Where a zygote keeps its machine code: `huge` (moved into transparent huge pages that every fork shares; the default) or `file` (the executable\'s pages, which perf can name)' -r
complete -c jqjaild -l prestart -d 'Workers kept started and ready' -r
complete -c jqjaild -l max-concurrent -d 'Jobs evaluated at once' -r
complete -c jqjaild -l max-queue -d 'Requests of one tenant waiting beyond which its new ones get OVERLOADED' -r
complete -c jqjaild -l idle-timeout-ms -d 'A connection with no request for this long is closed, milliseconds (default 300,000)' -r
complete -c jqjaild -l frame-timeout-ms -d 'A frame that has started, or an answer, must be through within this long, milliseconds (default 30,000)' -r
complete -c jqjaild -l drain-timeout-ms -d 'On SIGTERM, in-flight requests get this long to finish, milliseconds (default 10,000)' -r
complete -c jqjaild -l max-connections -d 'Open connections beyond which new ones are closed at once (default 1024)' -r
complete -c jqjaild -l max-connections-per-uid -d 'Open connections of one uid beyond which its new ones are closed at once (default 128)' -r
complete -c jqjaild -l max-uploads-per-tenant -d 'Runs of one tenant whose input may be arriving at once (default: the CPU count)' -r
complete -c jqjaild -l socket-mode -d 'Permission bits of the socket file, octal (default 0600)' -r
complete -c jqjaild -l quota-bytes -d 'Bytes of hides each tenant may keep' -r
complete -c jqjaild -l max-age-secs -d 'Hides older than this are deleted on the tenant\'s next put; 0 keeps them forever' -r
complete -c jqjaild -l on-full -d '`"evict"` (default: delete the oldest hides to make room) or `"refuse"` (`QUOTA_EXCEEDED`)' -r
complete -c jqjaild -l metrics-listen -d 'Serve Prometheus metrics over HTTP at this loopback IP:PORT or unix:PATH (default: off)' -r
complete -c jqjaild -l metrics-tenant-labels -d 'Label the metrics\' per-tenant counters with tenant names (default: false)' -r -f -a "true\t''
false\t''"
complete -c jqjaild -l metrics-socket-mode -d 'Permission bits of a unix:PATH metrics socket, octal (default 0600)' -r
complete -c jqjaild -l idle-exit-ms -d 'Exit after this many milliseconds without a connection' -r
complete -c jqjaild -l isolation -d 'Worker isolation beyond rlimits and seccomp: a comma-separated subset of user, ipc_uts, net, empty_root, or `none` (default: user,ipc_uts,empty_root)' -r
complete -c jqjaild -s h -l help -d 'Print help'
complete -c jqjaild -s V -l version -d 'Print version'
