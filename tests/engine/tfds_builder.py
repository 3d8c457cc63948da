"""Prepares a tiny TFDS dataset (``tiny_indexed``, 240 train / 60 test 8x8 grey images) in the
folder given on the command line, with no download: run as a script by the engine tests."""
import sys

import numpy as np
import tensorflow_datasets as tfds


class TinyIndexed(tfds.core.GeneratorBasedBuilder):
    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
            "image": tfds.features.Image(shape=(8, 8, 1)),
            "label": tfds.features.ClassLabel(names=["a", "b", "c"])}), supervised_keys=("image", "label"))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(0, 240), "test": self._generate_examples(240, 300)}

    def _generate_examples(self, start, stop):
        for i in range(start, stop):
            img = np.full((8, 8, 1), 80 * (i % 3), np.uint8)
            img[0, 0, 0], img[0, 1, 0] = i % 256, i // 256
            yield i, {"image": img, "label": i % 3}


if __name__ == "__main__":
    TinyIndexed(data_dir=sys.argv[1]).download_and_prepare()
