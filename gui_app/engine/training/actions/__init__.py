"""Actions: what the run controller does around the steps, one purpose per class (as Keras's
callbacks and Orbit's actions are). The controller calls each hook of every action in order;
``base.Action`` says when."""
