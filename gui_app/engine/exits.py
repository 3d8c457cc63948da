"""The engine's exit codes, one meaning each, for scripts and schedulers that run it.

0 completed or stopped; 1 failed in training (or a converter failed); 2 bad config or input,
with one line on stderr naming the key or the file; 130 interrupted (Ctrl+C during an export).
"""
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
