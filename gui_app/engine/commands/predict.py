"""``replica-studio predict``: classify images with a run or an exported model.

    replica-studio predict digits-int8.tflite seven.png two.jpg [--top 5] [--json] [--invert auto|always|never]
    replica-studio predict --serve MODEL_OR_RUN [--top 5]

``--serve`` is what the window's Try tab runs: the model loads once, then stdout carries
JSON lines only. First ``{"type": "ready", "model", "kind", "class_names", "input_shape",
"warnings", "has_test_set", "dark_background"}`` (or exit 2 with one line on stderr when the model
cannot be loaded); then one answer per stdin line:

    {"id": 1, "images": ["seven.png"]}   ->  {"type": "predictions", "id": 1, "predictions": [...]}
    {"id": 2, "test_samples": 8}         ->  the same, for 8 random test images (with labels)
    {"id": 3, "files": [{"source": "seven.png", "data": BASE64}]}   ->  the same, for files sent
                                         in the request: the window's images for a model on an SSH host

An ``images`` or ``files`` request may say ``"invert"``: ``auto`` (what it means without one: an
image with a light background is inverted for a model that learnt dark ones, ``dark_background``),
``always`` or ``never``; an inverted image's prediction says why (``"inverted"``). Test samples
are never inverted: they are what the model learnt from.

Each prediction carries source, label (or null), the top-k classes, every probability and
the image as the model sees it (:meth:`gui_app.core.predictions.Prediction.to_dict`). A bad
image gives ``{"type": "error", "id": N, "image": path, "message": "..."}`` and the others
are still answered; a request that is not understood gives an error line too. End of stdin
ends the process (exit 0).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from typing import Any, TextIO

from gui_app.core.answers import ServeAnswer, ServeReady, encode
from gui_app.core.formats import UNVERIFIED_SAVEDMODEL_FLAG, ExportError
from gui_app.core.messages import typed_line
from gui_app.core.predictions import INVERT_MODES, INVERTED, received_file
from gui_app.engine.commands.reporting import run_reporting_errors
from gui_app.engine.run.exits import EXIT_OK

COMMAND = "predict"
COMMANDS = (COMMAND,)
MAX_TEST_SAMPLES = 1000


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    predict = subparsers.add_parser(
        COMMAND, help="classify image files with a run or an exported model",
        description="Classify PNG/JPEG/BMP files with a run folder, .keras file, SavedModel folder, .tflite or "
                    ".onnx file; class names and preprocessing come from the model card beside it.")
    predict.add_argument("model", metavar="MODEL_OR_RUN")
    predict.add_argument("images", nargs="*", metavar="IMAGE")
    predict.add_argument("--top", type=int, default=5, metavar="K", help="classes to show per image (default 5)")
    predict.add_argument("--json", action="store_true", help="print one JSON object")
    predict.add_argument("--invert", choices=INVERT_MODES, default="auto",
                         help="invert the images first: auto (default) inverts those with a light background "
                              "for a model trained on light digits on dark (MNIST, digits)")
    predict.add_argument("--serve", action="store_true",
                         help="load the model once and answer JSON requests on stdin (used by the desktop app)")
    predict.add_argument(UNVERIFIED_SAVEDMODEL_FLAG, action="store_true", dest="allow_unverified_savedmodel",
                         help="load a SavedModel folder that carries no matching model card of ours (loading "
                              "a SavedModel runs its graph: only for folders you trust)")
    predict.add_argument("--debug", action="store_true", help="print tracebacks")
    predict.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return run_reporting_errors(COMMAND, _serve if args.serve else _predict, args)


def _check_args(args: argparse.Namespace) -> None:
    if args.top < 1:
        raise ExportError(f"--top: must be at least 1; got {args.top}")
    if args.serve and args.images:
        raise ExportError("--serve: images come on stdin, not on the command line")
    if not args.serve and not args.images:
        raise ExportError("IMAGE: give at least one image file (or --serve)")


def _predict(args: argparse.Namespace) -> int:
    from gui_app.engine.export import load_predictor

    _check_args(args)
    missing = [path for path in args.images if not os.path.isfile(path)]
    if missing:  # before the model loads: a typo should not cost a TensorFlow start
        what = "a folder, not an image file (give the images in it)" if os.path.isdir(missing[0]) else \
            "no such image file"
        raise ExportError(f"{missing[0]}: {what}")
    predictor = load_predictor(args.model, allow_unverified_savedmodel=args.allow_unverified_savedmodel)
    predictions = predictor.predict_files(args.images, invert=args.invert)
    if args.json:
        print(json.dumps({"model": str(predictor.source), "kind": predictor.kind,
                          "class_names": predictor.class_names, "warnings": predictor.warnings,
                          "predictions": [p.to_dict(args.top, pixels=False) for p in predictions]}))
        return EXIT_OK
    for warning in predictor.warnings:
        print(f"replica-studio predict: warning: {warning}", file=sys.stderr)
    width = max(len(name) for name in predictor.class_names)
    for prediction in predictions:
        print(prediction.source + (f" ({INVERTED[prediction.inverted]})" if prediction.inverted else ""))
        for _index, name, probability in prediction.top(args.top):
            print(f"  {name:<{width}}  {probability:7.2%}")
    return EXIT_OK


def _serve(args: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    from gui_app.engine.export import load_predictor

    _check_args(args)
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    sys.stdout = sys.stderr  # a library's stray print() must not break the JSON lines
    try:
        return _serve_lines(args, stdin, stdout, load_predictor)
    finally:
        sys.stdout = stdout


def _serve_lines(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, load_predictor) -> int:

    def send(value: dict[str, Any]) -> None:
        stdout.write(json.dumps(value) + "\n")
        stdout.flush()

    # ExportError (an unverified SavedModel too): exit 2, one line on stderr
    predictor = load_predictor(args.model, allow_unverified_savedmodel=args.allow_unverified_savedmodel)
    send(encode(ServeReady("ready", str(predictor.source), predictor.kind, list(predictor.class_names),
                           list(predictor.input_shape), list(predictor.warnings),
                           predictor.dataset_config is not None, bool(predictor.dark_background))))
    for line in stdin:
        if line.strip():
            for answer in _answer(predictor, line, args.top):
                send(answer)
    return EXIT_OK


def _answer(predictor, line: str, top: int) -> list[dict[str, Any]]:
    """The lines that answer one request line: errors first, then the predictions."""
    from gui_app.engine.export import read_image

    try:
        request = json.loads(line)
        if not isinstance(request, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        return [encode(ServeAnswer("error", None, message=f"not a request: {exc}"))]
    request_id = request.get("id")

    def error(message: str, image: str | None = None) -> dict[str, Any]:
        return encode(ServeAnswer("error", request_id, image=image, message=message))

    try:
        if "images" in request or "files" in request:
            invert = request.get("invert", "auto")
            if invert not in INVERT_MODES:
                return [error(f"invert: must be one of {', '.join(INVERT_MODES)}")]
            if "images" in request:
                paths = request["images"]
                if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
                    return [error("images: must be a list of file paths")]
                readers = [(path, functools.partial(read_image, path)) for path in paths]
            else:
                files = request["files"]
                if not isinstance(files, list) or not all(
                        isinstance(f, dict) and isinstance(f.get("source"), str) and isinstance(f.get("data"), str)
                        for f in files):
                    return [error('files: must be a list of {"source": name, "data": base64}')]
                readers = [(f["source"], functools.partial(_sent_image, f)) for f in files]
            answers, images, sources = [], [], []
            for source, reader in readers:
                try:
                    images.append(reader(predictor.input_shape))
                    sources.append(source)
                except ExportError as exc:
                    answers.append(error(str(exc), image=source))
            if images:
                import numpy as np

                found = predictor.predict_images(np.stack(images), sources, invert=invert)
                answers.append(_predictions(request_id, found, top))
            return answers
        if "test_samples" in request:
            count = request["test_samples"]
            if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_TEST_SAMPLES:
                return [error(f"test_samples: must be a whole number from 1 to {MAX_TEST_SAMPLES}")]
            images, labels = predictor.test_samples(count)
            found = predictor.predict_images(images, [f"test image {i + 1}" for i in range(len(images))], labels)
            return [_predictions(request_id, found, top)]
        return [error("a request has 'images', 'files' or 'test_samples'")]
    except ExportError as exc:
        return [error(str(exc))]
    except (KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as exc:  # noqa: BLE001 - one bad request must not end the session
        return [error(f"internal error: {typed_line(exc)}")]


def _sent_image(entry: dict[str, str], input_shape: tuple[int, int, int]):
    """The image of a ``files`` entry as the model sees it (ExportError naming its source)."""
    from gui_app.engine.export import image_from_bytes

    try:
        content = received_file(entry)
    except ValueError as exc:
        raise ExportError(str(exc)) from None
    return image_from_bytes(content, entry["source"], input_shape)


def _predictions(request_id, predictions, top: int) -> dict[str, Any]:
    return encode(ServeAnswer("predictions", request_id, predictions=[p.to_dict(top) for p in predictions]))
