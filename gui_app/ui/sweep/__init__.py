"""The window's sweeps: the New sweep dialog (its parameter rows) and the sweep view (the trials
table, the charts, the trials' curves read off the GUI thread); docs/sweeps.md, "In the window"."""
