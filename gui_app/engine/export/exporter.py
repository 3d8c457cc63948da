"""``export_run``: the one function behind the Export menu and ``replica-studio export``.

Load a finished run's model.keras, add the softmax, write the chosen format under a
temporary name beside the destination, load that file back in its own runtime and compare
it with the trained model on N test images, write the model card, and only then rename both
into place. A failed check, an error or a cancel leaves the destination as it was.

Progress goes to ``progress(fraction, message)``; ``cancel()`` is polled between stages,
between calibration images and between parity batches (a single converter call cannot be
interrupted, so a cancel takes effect when it returns).
"""
from __future__ import annotations

import gc
import json
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from gui_app.core.export_result import ExportResult
from gui_app.core.formats import DEFAULT_CHECK, ExportCancelled, ExportError, ExportFormat, get_format
from gui_app.engine.export.atomic import AtomicDestination
from gui_app.engine.export.model_card import build_card, card_path_for, export_sha256, write_card
from gui_app.engine.export.parity import check_parity
from gui_app.engine.export.probability import probability_model
from gui_app.engine.export.runtimes import image_shape, import_tensorflow, load_keras_model, open_runtime, scale_pixels
from gui_app.engine.export.writers import REPRESENTATIVE_EXAMPLES, write_export

ExportProgress = Callable[[float, str], None]  # (fraction done, what it is doing)


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ExportError(f"{path}: cannot read ({exc})") from None
    return data if isinstance(data, dict) else {}


def _check_output(fmt: ExportFormat, output: Path) -> None:
    if not fmt.is_directory and output.suffix.lower() != fmt.suffix:
        raise ExportError(f"output: {fmt.name} exports are {fmt.suffix} files; got {output.name!r}")
    if fmt.is_directory and output.suffix.lower() in (".keras", ".tflite", ".onnx", ".json"):
        raise ExportError(f"output: a SavedModel is a folder; got a file name {output.name!r}")


def export_run(run_dir: str | Path, fmt: str, output: str | Path, check: int = DEFAULT_CHECK,
               progress: ExportProgress | None = None, cancel: Callable[[], bool] | None = None,
               keep_failed: bool = False, model_file: str | Path | None = None,
               weights: str = "model.keras: the model at the end of the run") -> ExportResult:
    """Export the trained model of ``run_dir`` as ``fmt`` to ``output`` and check it on
    ``check`` test images (0 skips the check). ``model_file``: the model to export when it is
    not the run's model.keras (a stopped run's last checkpoint, saved as .keras), ``weights``
    what the card says it is. Raises ExportError (bad input, one line), ConversionError (the
    converter failed) or ExportCancelled."""
    from gui_app.core.config import ConfigError, RunConfig
    from gui_app.core.rundir import CONFIG_FILE, EVAL_FILE, MODEL_FILE

    started = time.monotonic()
    spec = get_format(fmt)
    run_dir, output = Path(run_dir).expanduser(), Path(output).expanduser()
    if check < 0:
        raise ExportError(f"check: must be >= 0 test images; got {check}")
    if not (run_dir / CONFIG_FILE).is_file():
        raise ExportError(f"{run_dir}: not a run folder (no {CONFIG_FILE})")
    model_file = Path(model_file) if model_file else run_dir / MODEL_FILE
    if not model_file.is_file():
        raise ExportError(f"{run_dir}: the run has no trained model ({MODEL_FILE}) and no checkpoint to export")
    try:
        config = RunConfig.load(run_dir / CONFIG_FILE)
    except ConfigError as exc:
        raise ExportError(f"{run_dir / CONFIG_FILE}: {exc}") from None
    eval_info = _read_json(run_dir / EVAL_FILE)
    _check_output(spec, output)

    def poll() -> None:
        if cancel is not None and cancel():
            raise ExportCancelled(f"export to {output} cancelled")

    def report(fraction: float, message: str) -> None:
        poll()
        if progress is not None:
            progress(fraction, message)

    card_path = card_path_for(output)
    with AtomicDestination(output, spec.is_directory) as out, AtomicDestination(card_path) as card_out:
        report(0.02, "Starting TensorFlow")
        import_tensorflow()
        report(0.10, "Loading the trained model")
        model = load_keras_model(model_file)
        if isinstance(model.input_shape, list):
            raise ExportError(f"{model_file}: the model has several inputs; expected one image input")
        input_shape = image_shape(model.input_shape, str(model_file))

        dataset = None
        if check > 0 or spec.name == "tflite-int8-full":
            report(0.15, f"Loading the {config.dataset.name} dataset")
            dataset = _load_dataset(config)
            if dataset.input_shape != input_shape:
                raise ExportError(f"{run_dir}: the model takes {input_shape} images but the dataset "
                                  f"{config.dataset.name} has {dataset.input_shape}")
        class_names = _class_names(run_dir, eval_info, dataset, model)

        report(0.25, "Computing the trained model's probabilities")
        wrapped = probability_model(model, input_shape)
        images = dataset.x_test[:check] if dataset is not None else np.zeros((0, *input_shape), np.uint8)
        labels = dataset.y_test[:check] if dataset is not None else None
        # Without a check, still call the model once: Keras refuses to export a never-called model.
        probe = scale_pixels(images) if len(images) else np.zeros((1, *input_shape), np.float32)
        reference = wrapped.predict(probe, batch_size=64, verbose=0)[:len(images)]

        report(0.30, f"Writing {spec.label}")
        details = write_export(spec, wrapped, out.temp, input_shape,
                               representative=_representative(dataset, poll) if dataset is not None else None)

        report(0.75, "Loading the file back in " + spec.runtime)
        runtime = open_runtime(out.temp, spec.kind)
        parity = None
        if check > 0:
            report(0.80, f"Checking {len(images)} test images")
            parity = check_parity(spec, runtime, images, labels, reference, cancel=poll)
        size = _size(out.temp)
        card = build_card(fmt=spec, export_path=output, size_bytes=size, run_dir=run_dir.absolute(),
                          run_config=config.to_dict(), class_names=class_names, runtime=runtime,
                          input_shape=input_shape, eval_info=eval_info, parity=parity,
                          extra={**details, "weights": weights})
        card["sha256"] = export_sha256(out.temp)  # predict opens a SavedModel only when this matches
        write_card(card_out.temp, card)
        # Let go of the loaded file (an mmapped .tflite, a SavedModel) before renaming it.
        del runtime
        gc.collect()
        report(0.98, "Saving")
        written = parity is None or parity.passed or keep_failed
        if written:
            out.commit()
            card_out.commit()
    if progress is not None:
        progress(1.0, "Done" if written else "Check failed: nothing was saved")
    return ExportResult(spec.name, output.absolute(), card_path.absolute(), size, parity, written,
                        time.monotonic() - started)


def _load_dataset(config):
    from gui_app.engine.datasets import DatasetError, load_dataset

    try:
        return load_dataset(config.dataset)
    except DatasetError as exc:
        raise ExportError(str(exc)) from None


def _class_names(run_dir: Path, eval_info: dict[str, Any], dataset, model) -> list[str]:
    """Class names in output order: those the evaluation used, else the dataset's."""
    names = eval_info.get("class_names") or (dataset.class_names if dataset is not None else None)
    outputs = model.output_shape[-1] if not isinstance(model.output_shape, list) else model.output_shape[0][-1]
    if not names:
        names = [str(i) for i in range(outputs)]
    if len(names) != outputs:
        raise ExportError(f"{run_dir}: the model has {outputs} outputs but the run has {len(names)} class names")
    return [str(n) for n in names]


def _representative(dataset, poll: Callable[[], None]) -> Callable[[], Iterator[np.ndarray]]:
    """Training images for full-integer calibration: a fixed random draw, so that two exports
    of the same run give the same file."""
    count = min(REPRESENTATIVE_EXAMPLES, len(dataset.x_train))
    chosen = np.random.default_rng(0).choice(len(dataset.x_train), size=count, replace=False)

    def images() -> Iterator[np.ndarray]:
        for index in chosen:
            poll()
            yield scale_pixels(dataset.x_train[index])
    return images
