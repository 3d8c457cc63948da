"""What an export produced, without TensorFlow: the parity report and the export result.

The engine's ``export --json`` writes :meth:`ExportResult.to_dict` as its last line; the
window's Export dialog reads it back with :meth:`ExportResult.from_dict`. Both records live
here, TensorFlow-free, so the window can use them (``gui_app.engine.export`` re-exports them).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ParityReport:
    format: str
    runtime: str
    examples: int  # test images compared
    max_abs_diff: float  # over every image and class probability
    mean_abs_diff: float
    top1_agreement: float  # fraction of images with the same top-1 class
    accuracy: float | None  # of the exported file on those images
    reference_accuracy: float | None  # of the trained model on the same images
    criterion: str
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ParityReport:
        return cls(**{f.name: data[f.name] for f in fields(cls)})

    def summary(self) -> str:
        """One line for the CLI and the dialog."""
        text = (f"{self.examples} test images ({self.runtime}): max abs diff {self.max_abs_diff:.2e}, "
                f"top-1 agreement {self.top1_agreement:.2%}")
        accuracy = self.accuracy_text()
        if accuracy:
            text += f", accuracy {accuracy}"
        return f"{text} -- {'PASS' if self.passed else 'FAIL'} ({self.criterion})"

    def accuracy_text(self) -> str | None:
        """The accuracies on the images checked, said as such: the run's test accuracy is over its
        whole test set, so a 256-image sample differs from it (96.88 % beside 95.82 %)."""
        if self.accuracy is None or self.reference_accuracy is None:
            return None
        return (f"{self.accuracy:.2%} on these {self.examples:,} images "
                f"(trained model {self.reference_accuracy:.2%} on the same images)")


@dataclass
class ExportResult:
    format: str
    path: Path  # where the export is (or would have been, when not written)
    card_path: Path
    size_bytes: int
    parity: ParityReport | None  # None when the check was skipped (check=0)
    written: bool  # False when the check failed (and keep_failed was off): nothing was kept
    seconds: float

    @property
    def passed(self) -> bool:
        return self.parity is None or self.parity.passed

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "path": str(self.path), "card_path": str(self.card_path),
                "size_bytes": self.size_bytes, "parity": self.parity.to_dict() if self.parity else None,
                "passed": self.passed, "written": self.written, "seconds": round(self.seconds, 3)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExportResult:
        """The inverse of :meth:`to_dict`; ValueError when a key is missing or wrong."""
        try:
            parity = ParityReport.from_dict(data["parity"]) if data.get("parity") else None
            return cls(str(data["format"]), Path(data["path"]), Path(data["card_path"]), int(data["size_bytes"]),
                       parity, bool(data["written"]), float(data["seconds"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not an export result: {type(exc).__name__}: {exc}") from None
