"""The micro base model's tokenizer and chat format, trained from nothing.

A byte-level BPE tokenizer is trained with `tokenizers` on text of the task families
(instances with `COMMON` names only: no held-out parameter value, hence no suite prompt
or command, is in its corpus), of the pretraining corpus and of the model agent's
conversation format, wrapped as a `PreTrainedTokenizerFast` with a Qwen-style chat
template (tools in the system turn, `<tool_call>` blocks in assistant turns,
`<tool_response>` blocks for tool results).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from typing import Any

from posttrain_arena.agents.model import SYSTEM_PROMPT, TOOLS
from posttrain_arena.challenges.micro.families import ALL_FAMILIES, COMMON

IM_START, IM_END, EOT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
# Markup tokens the agent's parser reads back from decoded text: ordinary (not special)
# added tokens, so `skip_special_tokens=True` keeps them, as in Qwen's tokenizers.
MARKUP = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]

CHAT_TEMPLATE = r"""
{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\n\n' }}{%- endif %}
{{- '# Tools:' }}
{%- for tool in tools %}
{%- set f = tool.function if tool.function is defined else tool %}
{%- set props = f.parameters.properties
      if f.parameters is defined and f.parameters.properties is defined else {} %}
{{- ' ' + f.name + '(' + (props | list | join(', ')) + ')' }}
{%- endfor %}
{{- '\nCall one as <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>' }}
{{- '<|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant' }}
{%- if message.content %}{{- '\n' + message.content }}{%- endif %}
{%- for call in (message.tool_calls or []) %}
{%- if call.function is defined %}{%- set call = call.function %}{%- endif %}
{{- '\n<tool_call>\n{"name": "' + call.name + '", "arguments": ' }}
{%- if call.arguments is string %}{{- call.arguments }}
{%- else %}{{- call.arguments | tojson }}{%- endif %}
{{- '}\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}
{{- '<|im_start|>user' }}{%- endif %}
{{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}
""".strip()



def tokenizer_corpus(seed: int = 0, per_family: int = 60) -> list[str]:
    """Text the tokenizer learns its merges from besides the pretraining corpus: the agent
    format and instances of every family (relevant and off-topic alike) with `COMMON`
    names, which neither split uses. The tokenizer knows the families' words, as a real
    base knows common English, but no split's names: fitted on training-pool instances,
    it had made the training stems one-token words and left the held-out ones in pieces,
    so SFT taught a copy (one token) that the suite never asks for (three or four)."""
    rng = random.Random(seed)
    texts = [SYSTEM_PROMPT, CHAT_TEMPLATE, *(json.dumps(t) for t in TOOLS)]
    for fam in ALL_FAMILIES:
        for _ in range(per_family):
            inst = fam.generate(rng, COMMON)
            call = json.dumps({"name": "bash", "arguments": {"command": inst.command}})
            texts += [inst.prompt, call, *inst.files.values(), *inst.expect.files.values()]
    texts += ["(no output)", "exit code: 0", "exit code: 1", "Time left:", "seconds"]
    return texts


def build_tokenizer(texts: Iterable[str], vocab_size: int = 2048) -> Any:
    """A byte-level BPE `PreTrainedTokenizerFast` with the Qwen-style chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=IM_END, pad_token=EOT, bos_token=None,
        unk_token=None, model_max_length=4096,
    )
    fast.add_tokens(MARKUP, special_tokens=False)
    fast.chat_template = CHAT_TEMPLATE
    return fast
