"""Hand-written: the one pretrained model the course borrows, all-MiniLM-L6-v2,
registered like a dataset."""

from __future__ import annotations

from tinybert.data.entry import DataFile, group

ENTRIES: list[DataFile] = []

# A real pretrained encoder, registered like a dataset: Hugging Face's all-MiniLM-L6-v2
# (a BertModel,
# 6 layers, hidden 384, bert-base-uncased's vocabulary). The files of one model
# must sit side by
# side in one folder (config.json next to model.safetensors):
# fetch_group("minilm") returns it.
_MINILM = (
    "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/"
    "c9745ed1d9f207416be6d2e6f8de32d1f16199bf/"
)
ENTRIES += group(
    "minilm",
    "pretrained/all-MiniLM-L6-v2",
    _MINILM,
    "Apache-2.0",
    "Nils Reimers, Iryna Gurevych (2019). Sentence-BERT: Sentence Embeddings using "
    "Siamese BERT-Networks; and Wenhui Wang, Furu Wei, Li Dong, Hangbo Bao, Nan "
    "Yang, Ming Zhou (2020). MiniLM: Deep Self-Attention Distillation for "
    "Task-Agnostic Compression of Pre-Trained Transformers. The model: "
    "sentence-transformers/all-MiniLM-L6-v2.",
    [
        (
            "model",
            "model.safetensors",
            90_868_376,
            ("53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
        ),
        (
            "config",
            "config.json",
            612,
            ("953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
        ),
        (
            "vocab",
            "vocab.txt",
            231_508,
            ("07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
        ),
        (
            "tokenizer",
            "tokenizer.json",
            466_247,
            ("be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
        ),
        (
            "tokenizer_config",
            "tokenizer_config.json",
            350,
            "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
        ),
        (
            "special_tokens_map",
            "special_tokens_map.json",
            112,
            "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
        ),
        (
            "modules",
            "modules.json",
            349,
            ("84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
        ),
        (
            "sentence_bert_config",
            "sentence_bert_config.json",
            53,
            "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
        ),
        (
            "config_sentence_transformers",
            "config_sentence_transformers.json",
            116,
            "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
        ),
        (
            "pooling_config",
            "1_Pooling/config.json",
            190,
            "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
        ),
        (
            "model_card",
            "README.md",
            10_454,
            ("7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7"),
        ),
    ],
    note="Pretrained weights, not a dataset. Its training pairs include SQuAD 2.0 "
    "training (question, passage) pairs (model card); the course evaluates on "
    "SQuAD v1.1 dev articles.",
)
