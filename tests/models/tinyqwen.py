"""A tiny, randomly initialised Qwen2-style model and a tokenizer trained in the test.

Nothing is downloaded: the tokenizer is a byte-level BPE trained with `tokenizers` on a
few sentences, wrapped in PreTrainedTokenizerFast with a Qwen-like chat template that
declares tools and renders `<tool_call>` blocks.
"""

from __future__ import annotations

from typing import Any

# transformers renders templates with trim_blocks: a newline right after a block tag is
# dropped, so newlines that follow tags are written as expressions.
CHAT_TEMPLATE = (
    "{% if messages[0].role == 'system' %}{% set system = messages[0].content %}"
    "{% else %}{% set system = 'You are a helpful assistant.' %}{% endif %}"
    "<|im_start|>system\n{{ system }}"
    "{% if tools %}{{ '\\n\\n# Tools\\n<tools>' }}"
    "{% for tool in tools %}{{ '\\n' }}{{ tool | tojson }}{% endfor %}{{ '\\n</tools>' }}"
    "{% endif %}<|im_end|>{{ '\\n' }}"
    "{% for message in messages %}"
    "{% if message.role == 'user' %}"
    "{{ '<|im_start|>user\\n' + message.content + '<|im_end|>\\n' }}"
    "{% elif message.role == 'assistant' %}{{ '<|im_start|>assistant\\n' + message.content }}"
    "{% for tc in message.tool_calls or [] %}"
    "{% if tc.function is defined %}{% set tc = tc.function %}{% endif %}"
    "{% if not (loop.first and not message.content) %}{{ '\\n' }}{% endif %}"
    "{{ '<tool_call>\\n{\"name\": \"' + tc.name + '\", \"arguments\": ' }}"
    "{{ tc.arguments | tojson }}{{ '}\\n</tool_call>' }}"
    "{% endfor %}{{ '<|im_end|>\\n' }}"
    "{% elif message.role == 'tool' %}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' + message.content }}"
    "{{ '\\n</tool_response><|im_end|>\\n' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_CORPUS = [
    "ls -la /root && cat hello.txt",
    'echo hello > out.txt; python3 -c "print(1+1)"',
    '{"name": "bash", "arguments": {"command": "ls"}}',
    "You are in a Linux shell. Run one command per turn with the bash tool.",
    "[exit code 0] [time left: 120s] No tool call found.",
]


def build_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        show_progress=False,
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.add_tokens(["<tool_call>", "</tool_call>"])
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(tokenizer: Any, seed: int = 0) -> Any:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    model = Qwen2ForCausalLM(config)
    model.eval()
    return model
