"""The parts of one training run in this process, around the run controller (engine/training/controller.py):

    context       the configuration, input source and strategy (RunContext), then the model,
                  optimizer and checkpoint (ModelState), in the order TensorFlow needs
    steps         the step runners, one per kind of strategy, and the statistics they all return
    actions/      what happens around the steps, one small class each: events, TensorBoard,
                  checkpoints, the NaN guard, the GPU sampler
    final_evaluation   the test set's figures, eval.json and misclassified.npz
"""
