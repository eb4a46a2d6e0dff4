"""Hand-written: the map of the ``tinybert`` package, which chapter builds which module.

``make export`` takes each generated module's docstring from ``MODULES`` and each
subpackage's from ``PACKAGES`` (a module that a chapter exports but that is missing here is an
error), and writes each subpackage's ``__init__.py``, which re-exports the public names of its
modules. The table on the "How this book is made" page lists the same modules; a test keeps
the two in step.
"""
from __future__ import annotations

# The layers of the package, lowest first: a subpackage (or top-level module) imports only
# from its own layer or lower ones, imports inside functions counted, and nothing loops
# (tests/test_layout.py). The "How this book is made" page lists them in this order.
LAYERS = (
    ("runtime", "reexport", "shipped"),
    ("checkpoint",),
    ("data",),
    ("blocks", "corpus", "tokenizers"),
    ("models",),
    ("training",),
    ("finetuning", "pretraining"),
    ("commands", "diagrams", "exercises", "__init__", "__main__"),
)

PACKAGES = {
    "blocks": "The building blocks of chapters 01-06: activations and feed-forward "
              "networks, the recurrent encoder-decoder with additive attention, attention, "
              "multi-head attention, positional encodings, the Transformer, its losses, "
              "schedules and decoders.",
    "tokenizers": "Chapter 07's tokenizers (BPE, byte-level BPE, WordPiece, Unigram), "
                  "their trainers and their shared encoding output.",
    "models": "BERT (chapter 08) and the variants of chapters 12-16 (RoBERTa, DistilBERT, "
              "ALBERT, ELECTRA), the registry of saved classes, the converters to and from "
              "Hugging Face's weights, and the course's pretrained checkpoint.",
    "checkpoint": "Storage that knows no model class (chapter 08): files written all or "
                  "nothing, and the readers of JSON and safetensors files.",
    "training": "What pretraining (chapter 09) and fine-tuning (chapters 10 and 11) "
                "share: special tokens, pair encoding, padding, sentence splitting, the "
                "optimiser and its schedule, and a training run's saved state.",
    "pretraining": "Pretraining (chapter 09, with the variants' objectives of chapters "
                   "11-16): documents, masking, examples, the optimiser and the loop.",
    "finetuning": "Fine-tuning (chapters 10 and 11): features, heads, the training loop, "
                  "the tasks' readers, metrics, extractive QA and the transfer ladder.",
}

MODULES = {
    "blocks.checks": "Argument checks and the description of a refused input, used by "
                     "every chapter.",
    "blocks.feedforward": "Activations, the multilayer perceptron and the position-wise "
                          "feed-forward block.",
    "corpus": "The course's books (Project Gutenberg) as text, words and a vocabulary.",
    "blocks.recurrent_attention": "The recurrent encoder-decoder: a GRU encoder, "
                                  "additive (Bahdanau) attention, and a decoder that "
                                  "reads a fixed-size summary or attends.",
    "blocks.attention": "Scaled dot-product attention, its masks and the fused fast path.",
    "blocks.multihead": "Multi-head attention: splitting and merging heads.",
    "blocks.positional": "Positional information: sinusoidal, learned and relative.",
    "blocks.rotary": "Rotary position embeddings (RoPE): queries and keys rotated by "
                     "their positions.",
    "blocks.transformer_layers": "Layer norm and the encoder and decoder layers and "
                                 "stacks.",
    "blocks.transformer": "The encoder-decoder Transformer: embeddings, configuration, "
                          "model.",
    "blocks.losses": "Label-smoothed cross-entropy.",
    "blocks.schedules": "The Transformer's learning-rate schedule.",
    "blocks.decoding": "Greedy decoding, beam search and sampling.",
    "blocks.language_model": "A decoder-only language model.",
    "tokenizers.encoding": "The Encoding every tokenizer returns, batch encoding and text "
                           "checks.",
    "tokenizers.bpe": "Byte-pair encoding, trained and applied step by step.",
    "tokenizers.normalizers": "BERT's normaliser and pre-tokeniser.",
    "tokenizers.wordpiece": "The WordPiece tokenizer and vocab.txt files.",
    "tokenizers.byte_level": "GPT-2 and RoBERTa's byte-level BPE.",
    "tokenizers.wordpiece_training": "Training a WordPiece vocabulary.",
    "tokenizers.unigram": "The unigram language-model tokenizer (SentencePiece, ALBERT).",
    "tokenizers.unigram_lattice": "The lattice of a word's pieces and the E step of "
                                  "unigram training (forward-backward).",
    "tokenizers.unigram_training": "Training a unigram vocabulary with EM: seed, EM "
                                   "steps and pruning.",
    "models.bert": "BERT: its configuration, the published presets, the initialisation, "
                   "the model and its output.",
    "models.bert_layers": "BERT's parts: its inputs checked (token and segment ids, the "
                          "attention mask), input embeddings, the encoder layer and stack, "
                          "and the pooler.",
    "models.bert_heads": "BERT's pretraining heads (masked language model, next sentence) "
                         "and the models that carry them.",
    "models.convert": "Hugging Face models to and from tinybert: the converters' "
                      "registry, renamed weights, BERT's converters.",
    "models.convert_names": "Hugging Face's names for BERT: activations, configuration "
                            "fields and tensor names.",
    "models.parity": "The parity report of every model against Hugging Face's, and the "
                     "round trip of its weights.",
    "models.pretrained_encoder": "A real pretrained BERT read from a Hugging Face "
                                 "folder without transformers, and all-MiniLM-L6-v2.",
    "models.attention_analysis": "What trained heads attend to: word-level attention and "
                                 "the dependency-relation analysis.",
    "checkpoint.files": "A model folder's file names and the checked readers of its "
                        "JSON and safetensors files.",
    "models.registry": "Every model class by name, and model folders (config and "
                       "weights) saved and loaded.",
    "checkpoint.atomic": "Files written all or nothing: one file renamed into place, a "
                         "set of files swapped in together, an interrupted save undone.",
    "training.state": "Training state (optimiser, schedule, step) saved and resumed.",
    "models.course_checkpoint": "The course's pretrained checkpoint, found and loaded.",
    "training.inputs": "BERT's inputs from text: special tokens, sentences, a pair "
                       "encoded with its segment ids, and features padded to a batch.",
    "pretraining.documents": "Pretraining documents: books, articles, task text "
                             "and segments.",
    "pretraining.objective": "What happens to one batch: its "
                             "masked-language-model corruption, its losses and one "
                             "training step.",
    "pretraining.pairs": "Next-sentence-prediction pairs: segments paired and "
                         "labelled.",
    "pretraining.examples": "Pretraining examples and their batches.",
    "training.optim": "AdamW with weight-decay groups, warm-up and decay, mixed "
                         "precision.",
    "pretraining.interrupts": "Ctrl-C while training: a request the loop answers after "
                              "its step.",
    "pretraining.evaluation": "Held-out evaluation of a pretraining model and the curves "
                              "of a run.",
    "pretraining.resume": "Resuming a pretraining run: the settings that must match, and "
                          "its state restored.",
    "pretraining.pretrain_loop": "The pretraining loop and its settings.",
    "pretraining.settings": "A run's settings as dataclass fields with their help, "
                            "their checks, and which a resumed run may change.",
    "pretraining.recipe": "A pretraining run's settings, loop and data, in one frozen "
                          "object that checks itself.",
    "pretraining.run_checks": "What a run checks before it starts: its folder and, when "
                              "resumed, its recipe and data.",
    "pretraining.run": "A whole run, end to end: `pretrain_bert`.",
    "pretraining.distributed": "Data-parallel pretraining across processes.",
    "finetuning.features": "Encoding single sentences, pairs and tagged words as padded "
                           "features.",
    "finetuning.heads": "Classification, tagging and span heads on an encoder.",
    "finetuning.finetune_loop": "The fine-tuning loop and prediction.",
    "finetuning.text_tasks": "Readers for the sentence tasks (Banking77, poem sentiment), "
                             "a held-out split and samples per label.",
    "finetuning.tagging_tasks": "Readers for the word-tagging tasks: UD part-of-speech "
                                "tags (CoNLL-U) and Universal NER (IOB2).",
    "finetuning.squad": "SQuAD's questions: the QA example, the course's split of the "
                        "development set and its reader.",
    "finetuning.metrics": "Accuracy, entity-level F1 and SQuAD's exact match and F1.",
    "finetuning.qa": "Extractive question answering: windows, answer spans and decoding.",
    "finetuning.recipes": "One call per task: a task's data, its head, fine-tuning and "
                          "the score.",
    "finetuning.feature_based": "Feature-based use of a frozen encoder: every "
        "layer's word vectors and a linear probe on them.",
    "finetuning.ladder": "The transfer ladder: three encoders, one recipe per task, a "
                         "score per run.",
    "finetuning.sentence_pairs": "Sentence pairs: QNLI-style question and sentence pairs "
                                 "from SQuAD, their formats, a baseline and one run.",
    "models.roberta": "RoBERTa: its embeddings, model, masked-LM head and converter.",
    "pretraining.roberta_data": "RoBERTa's full-sentence packing and per-epoch masks.",
    "models.distilbert": "DistilBERT: its model, masked-LM head and converter.",
    "pretraining.distillation": "The distillation loss and a student made from its "
                                "teacher.",
    "models.albert": "ALBERT: its configuration, factorised embeddings, shared layers "
                     "and the model.",
    "models.albert_heads": "ALBERT's heads (masked language model, sentence order) and "
                           "the models that carry them.",
    "models.convert_albert": "ALBERT's weights to and from Hugging Face.",
    "pretraining.sentence_order": "ALBERT's sentence-order prediction pairs.",
    "models.electra": "ELECTRA: its configuration, factorised embeddings without a "
                      "projection when E = D, and the encoder.",
    "models.electra_heads": "ELECTRA's generator (a masked language model) and "
                            "discriminator (a replaced-token head on every position).",
    "models.convert_electra": "ELECTRA's weights to and from Hugging Face.",
    "pretraining.electra": "ELECTRA's replaced-token detection: sampled replacements, "
                           "shared embeddings and the combined loss.",
}
