"""The engine's command line: the parser (cli) and one module per command, named by it."""
