//! The embedding model as llama.cpp reads it: all-MiniLM-L6-v2 ships as `model.safetensors`,
//! `tokenizer.json` and `config.json`; [`ensure_gguf`] converts them once into one GGUF file
//! (architecture `bert`, mean pooling, the WordPiece vocabulary) next to them in the model
//! cache, and reconverts when an input's checksum changes.
//!
//! GGUF (version 3): a header, key/value metadata, tensor descriptions (name, shape in ggml
//! order — the fastest-varying dimension first, i.e. the reverse of PyTorch's —, type, offset)
//! and the tensor data, each tensor aligned to 32 bytes. Tensor and key names follow
//! llama.cpp's BERT loader (`src/models/bert.cpp`, `src/llama-arch.cpp`).

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use trellis_encoder::safetensors::{BertConfig, SafeTensors};

fn bad(what: impl std::fmt::Display) -> Error {
    Error::Embedding(format!("model conversion: {what}"))
}

/// Bumped whenever the converter's output changes, so cached files are rebuilt.
const CONVERTER_VERSION: u32 = 1;
const ALIGN: usize = 32;
const INPUTS: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Storage type of the converted weight matrices (norms, biases and the small position and
/// token-type tables stay `f32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WeightType {
    /// 32-bit floats, as shipped.
    F32,
    /// IEEE half precision.
    F16,
    /// llama.cpp's 8-bit blocks: 32 weights share one f16 scale.
    Q8_0,
}

impl WeightType {
    /// The file-name tag (`f32`, `f16`, `q8_0`).
    pub fn as_str(self) -> &'static str {
        match self {
            WeightType::F32 => "f32",
            WeightType::F16 => "f16",
            WeightType::Q8_0 => "q8_0",
        }
    }

    /// Parses a file-name tag.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "f32" => Some(WeightType::F32),
            "f16" => Some(WeightType::F16),
            "q8_0" => Some(WeightType::Q8_0),
            _ => None,
        }
    }

    fn ggml_type(self) -> u32 {
        match self {
            WeightType::F32 => 0,
            WeightType::F16 => 1,
            WeightType::Q8_0 => 8,
        }
    }
}

/// What a converted file was made from (stored next to it as `<file>.json`).
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Stamp {
    converter: u32,
    weights: WeightType,
    /// Per input file: size, modification time (ns since the epoch) and SHA-256.
    inputs: BTreeMap<String, (u64, u128, String)>,
}

fn file_meta(path: &Path) -> Result<(u64, u128)> {
    let m = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Ok((m.len(), mtime))
}

fn sha256(path: &Path) -> Result<String> {
    trellis_fetch::sha256_file(path).map_err(|e| Error::Embedding(e.to_string()))
}

/// Returns the GGUF file for the model in `dir` with `weights`, converting it first when it is
/// missing or was made from other inputs. The inputs are re-hashed only when their size or
/// modification time differs from the stamp.
pub fn ensure_gguf(dir: &Path, weights: WeightType) -> Result<PathBuf> {
    let out = dir.join(format!("model.{}.gguf", weights.as_str()));
    let stamp_path = dir.join(format!("model.{}.gguf.json", weights.as_str()));
    let old: Option<Stamp> = std::fs::read(&stamp_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let mut inputs = BTreeMap::new();
    let mut same = old
        .as_ref()
        .is_some_and(|s| s.converter == CONVERTER_VERSION && s.weights == weights && out.is_file());
    for name in INPUTS {
        let path = dir.join(name);
        let (size, mtime) = file_meta(&path)?;
        let known = old
            .as_ref()
            .and_then(|s| s.inputs.get(name))
            .filter(|(s, m, _)| *s == size && *m == mtime)
            .map(|(_, _, h)| h.clone());
        let hash = match known {
            Some(h) => h,
            None => {
                let h = sha256(&path)?;
                same &= old
                    .as_ref()
                    .and_then(|s| s.inputs.get(name))
                    .is_some_and(|(_, _, old_h)| *old_h == h);
                h
            }
        };
        inputs.insert(name.to_string(), (size, mtime, hash));
    }
    if same && old.as_ref().is_some_and(|s| s.inputs == inputs) {
        return Ok(out);
    }
    let tmp = dir.join(format!(
        ".model.{}.gguf.{}.tmp",
        weights.as_str(),
        std::process::id()
    ));
    convert(dir, weights, &tmp)?;
    std::fs::rename(&tmp, &out).map_err(|e| Error::io(&out, e))?;
    let stamp = Stamp {
        converter: CONVERTER_VERSION,
        weights,
        inputs,
    };
    let json = serde_json::to_vec_pretty(&stamp).map_err(|e| Error::Embedding(e.to_string()))?;
    std::fs::write(&stamp_path, json).map_err(|e| Error::io(&stamp_path, e))?;
    Ok(out)
}

/// One tensor to write: GGUF name, ggml shape, type, data.
struct Tensor {
    name: String,
    ne: Vec<u64>,
    ggml_type: u32,
    data: Vec<u8>,
}

fn encode(values: &[f32], ty: WeightType) -> Vec<u8> {
    match ty {
        WeightType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        WeightType::F16 => values
            .iter()
            .flat_map(|&v| f32_to_f16(v).to_le_bytes())
            .collect(),
        WeightType::Q8_0 => {
            let mut out = Vec::with_capacity(values.len() / 32 * 34);
            for block in values.chunks(32) {
                let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
                let d = amax / 127.0;
                let id = if d == 0.0 { 0.0 } else { 1.0 / d };
                out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
                for &v in block {
                    // In range by construction: |v * id| <= 127.
                    #[allow(clippy::cast_possible_truncation)]
                    let q = (v * id).round() as i8;
                    out.push(q.to_le_bytes()[0]);
                }
            }
            out
        }
    }
}

/// IEEE 754 binary16 bits of `v`, rounded to nearest even.
pub fn f32_to_f16(v: f32) -> u16 {
    let x = v.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x007f_ffff;
    if exp == 0xff {
        // Inf or NaN (keep NaN quiet).
        return sign | 0x7c00 | if man != 0 { 0x0200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        // Subnormal: shift the mantissa (with its implicit bit) into place, rounding.
        let m = man | 0x0080_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1u32 << shift) - 1);
        let mut h = (m >> shift) as u16;
        if rest > half || (rest == half && (h & 1) == 1) {
            h += 1;
        }
        return sign | h;
    }
    let mut h = ((e as u32) << 10 | (man >> 13)) as u16;
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && (h & 1) == 1) {
        // May carry into the exponent, which is the correct rounding (up to infinity).
        h += 1;
    }
    sign | h
}

/// Converts the safetensors BERT model in `dir` into a GGUF file at `out`.
pub fn convert(dir: &Path, weights: WeightType, out: &Path) -> Result<()> {
    let cfg = BertConfig::read(&dir.join("config.json"))?;
    let tokens = vocab(&dir.join("tokenizer.json"))?;
    let st = SafeTensors::read(&dir.join("model.safetensors"))?;
    let prefix = st.bert_prefix();

    let mut tensors = Vec::new();
    let mut add = |gguf: String, st_name: String, ty: WeightType| -> Result<()> {
        let (values, shape) = st.f32(&format!("{prefix}{st_name}"))?;
        // Quantised blocks need rows that are a multiple of 32 weights.
        let ty = match (ty, shape.last()) {
            (WeightType::Q8_0, Some(n)) if n % 32 != 0 => WeightType::F16,
            (t, _) => t,
        };
        tensors.push(Tensor {
            name: gguf,
            ne: shape.iter().rev().map(|&d| d as u64).collect(),
            ggml_type: ty.ggml_type(),
            data: encode(&values, ty),
        });
        Ok(())
    };
    let f = WeightType::F32;
    add(
        "token_embd.weight".into(),
        "embeddings.word_embeddings.weight".into(),
        weights,
    )?;
    add(
        "position_embd.weight".into(),
        "embeddings.position_embeddings.weight".into(),
        f,
    )?;
    add(
        "token_types.weight".into(),
        "embeddings.token_type_embeddings.weight".into(),
        f,
    )?;
    add(
        "token_embd_norm.weight".into(),
        "embeddings.LayerNorm.weight".into(),
        f,
    )?;
    add(
        "token_embd_norm.bias".into(),
        "embeddings.LayerNorm.bias".into(),
        f,
    )?;
    for i in 0..cfg.num_hidden_layers {
        let l = format!("encoder.layer.{i}");
        let b = format!("blk.{i}");
        for (g, s) in [
            ("attn_q", "attention.self.query"),
            ("attn_k", "attention.self.key"),
            ("attn_v", "attention.self.value"),
            ("attn_output", "attention.output.dense"),
            ("ffn_up", "intermediate.dense"),
            ("ffn_down", "output.dense"),
        ] {
            add(
                format!("{b}.{g}.weight"),
                format!("{l}.{s}.weight"),
                weights,
            )?;
            add(format!("{b}.{g}.bias"), format!("{l}.{s}.bias"), f)?;
        }
        for (g, s) in [
            ("attn_output_norm", "attention.output.LayerNorm"),
            ("layer_output_norm", "output.LayerNorm"),
        ] {
            add(format!("{b}.{g}.weight"), format!("{l}.{s}.weight"), f)?;
            add(format!("{b}.{g}.bias"), format!("{l}.{s}.bias"), f)?;
        }
    }

    let mut kv = Kv::default();
    kv.string("general.architecture", "bert");
    kv.string("general.name", "all-MiniLM-L6-v2");
    kv.u32("general.alignment", ALIGN as u32);
    kv.u32("bert.context_length", cfg.max_position_embeddings);
    kv.u32("bert.embedding_length", cfg.hidden_size);
    kv.u32("bert.feed_forward_length", cfg.intermediate_size);
    kv.u32("bert.block_count", cfg.num_hidden_layers);
    kv.u32("bert.attention.head_count", cfg.num_attention_heads);
    kv.f32("bert.attention.layer_norm_epsilon", cfg.layer_norm_eps);
    kv.bool("bert.attention.causal", false);
    kv.u32("bert.pooling_type", 1); // mean
    kv.string("tokenizer.ggml.model", "bert");
    kv.strings(
        "tokenizer.ggml.tokens",
        tokens.iter().map(|(t, _)| t.as_str()),
    );
    kv.i32s(
        "tokenizer.ggml.token_type",
        tokens.iter().map(|(_, ty)| *ty),
    );
    kv.u32("tokenizer.ggml.token_type_count", cfg.type_vocab_size);
    kv.bool("tokenizer.ggml.normalizer.lowercase", true);
    kv.bool("tokenizer.ggml.normalizer.strip_accents", true);
    for (key, token) in [
        ("unknown_token_id", "[UNK]"),
        ("cls_token_id", "[CLS]"),
        ("bos_token_id", "[CLS]"),
        ("seperator_token_id", "[SEP]"),
        ("padding_token_id", "[PAD]"),
        ("mask_token_id", "[MASK]"),
    ] {
        let id = tokens
            .iter()
            .position(|(t, ty)| *ty == TOKEN_CONTROL && t == token)
            .ok_or_else(|| bad(format!("special token {token} missing from the vocabulary")))?;
        kv.u32(&format!("tokenizer.ggml.{key}"), id as u32);
    }
    write_gguf(out, &kv, &tensors)
}

const TOKEN_NORMAL: i32 = 1;
const TOKEN_CONTROL: i32 = 3;

/// The WordPiece vocabulary in id order, in llama.cpp's spelling: a word-initial piece gets
/// the phantom-space prefix `▁`, a continuation (`##x`) loses its `##`; the tokenizer's added
/// special tokens (`[CLS]` …) are control tokens, spelled as they are.
fn vocab(path: &Path) -> Result<Vec<(String, i32)>> {
    #[derive(Deserialize)]
    struct Added {
        id: usize,
        content: String,
        special: bool,
    }
    #[derive(Deserialize)]
    struct Model {
        #[serde(rename = "type")]
        kind: String,
        vocab: BTreeMap<String, usize>,
        continuing_subword_prefix: Option<String>,
    }
    #[derive(Deserialize)]
    struct TokenizerJson {
        model: Model,
        #[serde(default)]
        added_tokens: Vec<Added>,
    }
    let t: TokenizerJson =
        serde_json::from_slice(&std::fs::read(path).map_err(|e| Error::io(path, e))?)
            .map_err(|e| bad(format!("{}: {e}", path.display())))?;
    if t.model.kind != "WordPiece" {
        return Err(bad(format!(
            "tokenizer model {}, expected WordPiece",
            t.model.kind
        )));
    }
    let cont = t.model.continuing_subword_prefix.as_deref().unwrap_or("##");
    let n = t.model.vocab.values().max().map_or(0, |m| m + 1);
    let mut out: Vec<Option<(String, i32)>> = vec![None; n];
    for (piece, id) in &t.model.vocab {
        let spelled = match piece.strip_prefix(cont) {
            Some(rest) if !rest.is_empty() => rest.to_string(),
            _ => format!("\u{2581}{piece}"),
        };
        out[*id] = Some((spelled, TOKEN_NORMAL));
    }
    for a in t.added_tokens.iter().filter(|a| a.special) {
        if let Some(slot) = out.get_mut(a.id) {
            *slot = Some((a.content.clone(), TOKEN_CONTROL));
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(i, t)| t.ok_or_else(|| bad(format!("vocabulary has no token {i}"))))
        .collect()
}

/// GGUF metadata, serialised in insertion order.
#[derive(Default)]
struct Kv {
    count: u64,
    bytes: Vec<u8>,
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
    buf.extend_from_slice(s.as_bytes());
}

impl Kv {
    fn key(&mut self, key: &str, ty: u32) {
        self.count += 1;
        put_str(&mut self.bytes, key);
        self.bytes.extend_from_slice(&ty.to_le_bytes());
    }
    fn u32(&mut self, key: &str, v: u32) {
        self.key(key, 4);
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    fn f32(&mut self, key: &str, v: f32) {
        self.key(key, 6);
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    fn bool(&mut self, key: &str, v: bool) {
        self.key(key, 7);
        self.bytes.push(u8::from(v));
    }
    fn string(&mut self, key: &str, v: &str) {
        self.key(key, 8);
        put_str(&mut self.bytes, v);
    }
    fn strings<'a>(&mut self, key: &str, v: impl ExactSizeIterator<Item = &'a str>) {
        self.key(key, 9);
        self.bytes.extend_from_slice(&8u32.to_le_bytes());
        self.bytes
            .extend_from_slice(&(v.len() as u64).to_le_bytes());
        for s in v {
            put_str(&mut self.bytes, s);
        }
    }
    fn i32s(&mut self, key: &str, v: impl ExactSizeIterator<Item = i32>) {
        self.key(key, 9);
        self.bytes.extend_from_slice(&5u32.to_le_bytes());
        self.bytes
            .extend_from_slice(&(v.len() as u64).to_le_bytes());
        for x in v {
            self.bytes.extend_from_slice(&x.to_le_bytes());
        }
    }
}

fn padding(len: usize) -> usize {
    (ALIGN - len % ALIGN) % ALIGN
}

fn write_gguf(out: &Path, kv: &Kv, tensors: &[Tensor]) -> Result<()> {
    let io = |e| Error::io(out, e);
    let mut head = Vec::new();
    head.extend_from_slice(b"GGUF");
    head.extend_from_slice(&3u32.to_le_bytes());
    head.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    head.extend_from_slice(&kv.count.to_le_bytes());
    head.extend_from_slice(&kv.bytes);
    let mut offset = 0usize;
    for t in tensors {
        put_str(&mut head, &t.name);
        head.extend_from_slice(&(t.ne.len() as u32).to_le_bytes());
        for d in &t.ne {
            head.extend_from_slice(&d.to_le_bytes());
        }
        head.extend_from_slice(&t.ggml_type.to_le_bytes());
        head.extend_from_slice(&(offset as u64).to_le_bytes());
        offset += t.data.len() + padding(t.data.len());
    }
    head.resize(head.len() + padding(head.len()), 0);
    let mut w = BufWriter::new(std::fs::File::create(out).map_err(io)?);
    w.write_all(&head).map_err(io)?;
    for t in tensors {
        w.write_all(&t.data).map_err(io)?;
        w.write_all(&vec![0u8; padding(t.data.len())]).map_err(io)?;
    }
    w.into_inner()
        .map_err(|e| Error::io(out, e.into_error()))?
        .sync_all()
        .map_err(io)
}

#[cfg(test)]
mod tests {
    use super::f32_to_f16;

    #[test]
    fn half_precision_rounding() {
        assert_eq!(f32_to_f16(0.0), 0);
        assert_eq!(f32_to_f16(-0.0), 0x8000);
        assert_eq!(f32_to_f16(1.0), 0x3c00);
        assert_eq!(f32_to_f16(-2.0), 0xc000);
        assert_eq!(f32_to_f16(65504.0), 0x7bff);
        assert_eq!(f32_to_f16(1e6), 0x7c00);
        assert_eq!(f32_to_f16(f32::NAN) & 0x7e00, 0x7e00);
        // Smallest subnormal, and ties to even.
        assert_eq!(f32_to_f16(5.960_464_5e-8), 1);
        assert_eq!(f32_to_f16(1.0 + 1.0 / 2048.0), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 / 2048.0), 0x3c02);
        assert_eq!(f32_to_f16(0.1), 0x2e66);
    }
}
