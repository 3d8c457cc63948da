"""TensorFlow side of one training run in this process: the session and its run controller, and
the parts they drive.

    session       set up the input, strategy and model, restore the newest checkpoint, run
    controller    the outer loop of every strategy (Orbit's controller): step groups, validation,
                  stop and pause
    context       the configuration, input source and strategy (RunContext), then the model,
                  optimizer and checkpoint (ModelState), in the order TensorFlow needs
    steps         the step runners, one per kind of strategy, and the statistics they all return
    actions/      what happens around the steps, one small class each: events, TensorBoard,
                  checkpoints, the NaN guard, the GPU sampler
    final_evaluation   the test set's figures, eval.json and misclassified.npz
    replay        after the NaN guard: the first layer that went non-finite
    loop, models, strategies, optim, inputs (in_memory, pipeline, streaming), evaluation,
    tensorboard, devices, ps_loop, retire: the TensorFlow building blocks
"""
