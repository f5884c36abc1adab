#!/usr/bin/env python3
"""Reference embeddings for all-MiniLM-L6-v2 from a from-scratch numpy BERT.

Independent of candle: reads model.safetensors with the `safetensors` numpy loader, tokenizes
with Hugging Face `tokenizers` (truncation 256, as sentence-transformers does), runs the BERT
encoder in float64, mean-pools over the attention mask and L2-normalises — the
sentence-transformers pipeline of the model (Transformer -> Pooling(mean) -> Normalize).

    pip install numpy safetensors tokenizers
    python3 minilm_reference.py MODEL_DIR > ../tests/fixtures/minilm_reference.json
"""
import json
import math
import sys

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

# The first three are the sentence-transformers quickstart; its documented similarities for
# this model are 0.6660 (0-1), 0.1046 (0-2) and 0.1411 (1-2).
SENTENCES = [
    "The weather is lovely today.",
    "It's so sunny outside!",
    "He drove to the stadium.",
    "This is an example sentence",
    "Each sentence is converted",
    "The cat sits outside",
    "A man is playing guitar",
    "The new movie is awesome",
    "fn parse_config(path: &Path) -> Result<Config> { let text = std::fs::read_to_string(path)?; toml::from_str(&text) }",
    "def load_users(db):\n    \"\"\"Load every user from the database.\"\"\"\n    return db.query(User).all()",
    "Résumé of naïve café owners — unicode ✓ and CJK 漢字 handling",
    " ".join(["long"] * 400),
]


def gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def layer_norm(x, w, b, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def embed(w, cfg, ids):
    h = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    d = h // heads
    n = len(ids)
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        lin = lambda t, name: t @ w[p + name + ".weight"].T + w[p + name + ".bias"]
        q = lin(x, "attention.self.query").reshape(n, heads, d).transpose(1, 0, 2)
        k = lin(x, "attention.self.key").reshape(n, heads, d).transpose(1, 0, 2)
        v = lin(x, "attention.self.value").reshape(n, heads, d).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        s = np.exp(s - s.max(-1, keepdims=True))
        s = s / s.sum(-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(n, h)
        a = lin(a, "attention.output.dense")
        x = layer_norm(x + a, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
        f = gelu(lin(x, "intermediate.dense"))
        f = lin(f, "output.dense")
        x = layer_norm(x + f, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    m = x.mean(0)
    return m / np.linalg.norm(m)


def main():
    model_dir = sys.argv[1]
    cfg = json.load(open(f"{model_dir}/config.json"))
    raw = load_file(f"{model_dir}/model.safetensors")
    w = {k.removeprefix("bert."): v.astype(np.float64) for k, v in raw.items()}
    tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    tok.enable_truncation(256)
    tok.no_padding()
    out = []
    for s in SENTENCES:
        ids = tok.encode(s).ids
        out.append({"text": s, "tokens": len(ids), "embedding": [round(float(x), 7) for x in embed(w, cfg, ids)]})
    json.dump({"model": "all-MiniLM-L6-v2", "max_tokens": 256, "sentences": out}, sys.stdout)


if __name__ == "__main__":
    main()
