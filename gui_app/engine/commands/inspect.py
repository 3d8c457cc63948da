"""``replica-studio inspect CONFIG [--json] [--samples FILE.npz]``: the dataset and model a
configuration describes, without training (the window's dataset and model summary). A model that
cannot be built (a missing or foreign .keras file) still gets the dataset described first: with
``--json`` the answer's ``model`` is null and ``model_error`` its line; either way the command
ends with that line on stderr and exit 2."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.image_files import source_images
from gui_app.core.wording import count, example_counts
from gui_app.engine.commands.reporting import one_line_errors
from gui_app.engine.run.exits import EXIT_OK

COMMANDS = ("inspect",)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("inspect", help="describe the dataset and model of a configuration")
    p.add_argument("config")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--samples", help="write sample images (npz with x, y) here")
    p.add_argument("--debug", action="store_true")
    p.set_defaults(handler=one_line_errors(_inspect))


def _inspect(args) -> int:
    import numpy as np

    from gui_app.engine.datasets.loading import inspect_dataset
    from gui_app.engine.training.models import ModelError, build_model, describe

    if args.samples and Path(args.samples).is_dir():  # numpy would write FOLDER.npz beside it, unasked
        raise ConfigError(f"--samples: {args.samples} is a folder; name the .npz file to write")
    config = RunConfig.load(args.config)
    dataset = inspect_dataset(config.dataset)  # a bounded sample when the set would stream
    summary = dataset.summary()
    summary["warnings"] = list(dataset.warnings)
    summary["source_images"] = source_images(config.dataset.name, config.dataset.path)
    try:
        model, model_error = describe(build_model(config.model, dataset.input_shape, dataset.num_classes)), None
    except ModelError as exc:
        # The dataset is fine: say so before the model's error, so the window's dataset summary
        # stays beside a model field marked wrong (the answer's "model_error"; exit 2 still).
        model, model_error = None, str(exc)
    if args.samples:
        per_class = max(1, min(8, 64 // dataset.num_classes))
        picks = np.concatenate([np.flatnonzero(dataset.y_train == c)[:per_class] for c in range(dataset.num_classes)])
        try:
            Path(args.samples).parent.mkdir(parents=True, exist_ok=True)
            with open(args.samples, "wb") as f:  # a file, not a name: numpy adds no .npz to it
                np.savez_compressed(f, x=dataset.x_train[picks], y=dataset.y_train[picks])
        except FileExistsError:  # mkdir met a file where a parent folder should be
            raise ConfigError(f"--samples: {Path(args.samples).parent} is a file, not a folder") from None
        except OSError as exc:  # the line names the path asked for
            raise ConfigError(f"--samples: cannot write {args.samples}: {exc.strerror or exc}") from None
    if args.json:
        out: dict[str, object] = {"dataset": summary, "model": model}
        if model_error is not None:
            out["model_error"] = model_error
        print(json.dumps(out), flush=True)
    else:
        d = summary
        print(f"{d['name']}: {example_counts(d)}, input {'x'.join(map(str, d['input_shape']))}, "
              f"{count(len(d['class_names']), 'class', 'classes')}")
        source = d["source_images"]
        if source:
            h, w = source["size"]
            print(f"source images: {'sizes vary, mostly ' if source['varied'] else ''}{h}x{w} "
                  f"{'grey' if source['color_mode'] == 'grayscale' else 'colour'}")
        if model is not None:
            print(f"{model['name']}: {model['parameters']:,} parameters in {count(len(model['layers']), 'layer')}")
    if model_error is not None:
        raise ConfigError(model_error)
    return EXIT_OK
