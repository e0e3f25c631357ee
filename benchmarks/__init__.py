"""fairtune's benchmarks: each module is a script, run from the repository's root as
``python -m benchmarks.<name> --help``; :mod:`benchmarks._common` holds what they share (paired
statistics, resumable result files, splits, the plots' style). The pages under
``docs/benchmarks/`` give each script's commands and results."""
