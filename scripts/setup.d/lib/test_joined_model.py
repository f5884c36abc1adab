"""Tests of joined_model.py's GGUF check (scripts/check runs them): a file whose header
matches the manifest's `gguf` table passes, and each field that differs is named with what
was expected and found.

    python3 -m unittest discover -s scripts/setup.d/lib -p 'test_*.py'
"""

import os
import sys
import tempfile
import unittest

import numpy as np
from gguf import GGUFWriter

sys.path.insert(0, os.path.dirname(__file__))
from joined_model import check_gguf  # noqa: E402

EXPECTED = {
    "general.architecture": "qwen2",
    "qwen2.block_count": 2,
    "qwen2.context_length": 32768,
    "tokenizer.ggml.model": "gpt2",
    "tensors": 1,
}


def write(path, arch="qwen2", blocks=2, template=True, tensors=1):
    w = GGUFWriter(path, arch)
    w.add_block_count(blocks)
    w.add_context_length(32768)
    w.add_tokenizer_model("gpt2")
    if template:
        w.add_chat_template("{{ messages }}")
    for i in range(tensors):
        w.add_tensor(f"t{i}", np.zeros((4,), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


class CheckGguf(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "m.gguf")

    def tearDown(self):
        self.dir.cleanup()

    def test_a_matching_file_passes(self):
        write(self.path)
        self.assertEqual(check_gguf(self.path, EXPECTED), [])

    def test_each_difference_is_named(self):
        write(self.path, arch="llama", template=False, tensors=2)
        differ = check_gguf(self.path, EXPECTED)
        self.assertIn("general.architecture: expected 'qwen2', found 'llama'", differ)
        # The block count is read under the manifest's key, which a llama file lacks.
        self.assertIn("qwen2.block_count: expected 2, found None", differ)
        self.assertIn("tensors: expected 1, found 2", differ)
        self.assertIn("tokenizer.chat_template: missing", differ)

    def test_a_wrong_value_under_the_right_key(self):
        write(self.path, blocks=3)
        self.assertEqual(check_gguf(self.path, EXPECTED), ["qwen2.block_count: expected 2, found 3"])


if __name__ == "__main__":
    unittest.main()
