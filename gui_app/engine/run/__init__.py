"""The process that holds a run: detached, its control words, its events and records, how it ends."""
