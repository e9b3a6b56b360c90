"""A tiny random Qwen2-style model and tokenizer with a tool-aware chat template.

Built in the test from nothing (tokenizer trained with `tokenizers`, random weights);
nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% if messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}"
    "{% if tools %}\n<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools>{% endif %}"
    "<|im_end|>\n{% set rest = messages[1:] %}"
    "{% else %}{% set rest = messages %}{% endif %}"
    "{% for m in rest %}"
    "{% if m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content }}"
    "{% for tc in m.tool_calls or [] %}<tool_call>{\"name\": \"{{ tc.function.name }}\", "
    "\"arguments\": {{ tc.function.arguments | tojson }}}</tool_call>{% endfor %}<|im_end|>\n"
    "{% elif m.role == 'tool' %}<|im_start|>user\n<tool_response>{{ m.content }}"
    "</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

CORPUS = [
    "write the word hello into the file out.txt in the working directory",
    "echo hello > out.txt ; cat out.txt ; ls -la ; the command printed nothing",
    '<tool_call>{"name": "bash", "arguments": {"command": "echo hi"}}</tool_call>',
    '<tool_call>{"name": "submit", "arguments": {}}</tool_call>',
    "You are an agent in a Linux sandbox. Use the bash tool; call submit when done.",
    "exit code 0 stdout stderr time left seconds task prompt",
]


def build_tiny_model(path: Path, *, layers: int = 2, hidden: int = 64, vocab: int = 400) -> Path:
    """Write a tiny model folder (config, random weights, tokenizer) at `path`."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", bos_token=None)
    fast.chat_template = CHAT_TEMPLATE
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(path))
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(fast), hidden_size=hidden, intermediate_size=hidden * 2,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=2048, tie_word_embeddings=True,
        eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=fast.pad_token_id, bos_token_id=None,
    )
    Qwen2ForCausalLM(config).save_pretrained(str(path))
    return path
