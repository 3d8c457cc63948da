"""The graph every export holds: the trained model with a float32 softmax on top."""
from __future__ import annotations

from gui_app.core.formats import INPUT_NAME, OUTPUT_NAME, ExportError


def probability_model(model, input_shape: tuple[int, int, int]):
    """``model`` (logits, or already probabilities) -> a model returning float32 probabilities
    for float32 NHWC input named ``image``."""
    import keras

    from gui_app.engine.training.models import outputs_logits

    inputs = keras.Input(shape=tuple(input_shape), name=INPUT_NAME, dtype="float32")
    outputs = model(inputs, training=False)
    if isinstance(outputs, (list, tuple)):  # keras.Model(base.inputs, base.outputs) returns a list
        if len(outputs) != 1:
            raise ExportError(f"model: has {len(outputs)} outputs; Replica Studio exports single-output classifiers")
        outputs = outputs[0]
    ends_in_softmax = not outputs_logits(model)
    # dtype float32: a mixed-precision model still hands out float32 probabilities.
    head = (keras.layers.Activation("linear", name=OUTPUT_NAME, dtype="float32") if ends_in_softmax
            else keras.layers.Softmax(name=OUTPUT_NAME, dtype="float32"))
    return keras.Model(inputs, head(outputs), name=f"{model.name}_probabilities")
