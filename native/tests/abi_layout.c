/* abi_layout.c — prints the size of every ABI struct the binding writes and the offset of each field, as JSON:
 *   {"splash_seq": {"size": 136, "fields": {"slot": 0, ...}}, ...}
 * test/unit/native-layout.test.ts compares it with src/native/layout.ts. */
#include "splash.h"

#include <stddef.h>
#include <stdio.h>

#define FIELD(type, f) printf("%s\"%s\": %zu", first ? "" : ", ", #f, offsetof(type, f)), first = 0
#define BEGIN(type) printf("%s\"%s\": {\"size\": %zu, \"fields\": {", n++ ? ", " : "", #type, sizeof(type)), first = 1
#define END() printf("}}")

int main(void) {
    int n = 0, first;
    printf("{");
    BEGIN(splash_load_options);
    FIELD(splash_load_options, struct_size);
    FIELD(splash_load_options, quant);
    FIELD(splash_load_options, n_threads);
    FIELD(splash_load_options, max_step_tokens);
    FIELD(splash_load_options, backend);
    END();
    BEGIN(splash_model_info);
    FIELD(splash_model_info, struct_size);
    FIELD(splash_model_info, arch);
    FIELD(splash_model_info, vocab_size);
    FIELD(splash_model_info, hidden_size);
    FIELD(splash_model_info, n_layers);
    FIELD(splash_model_info, n_full_attention_layers);
    FIELD(splash_model_info, n_linear_attention_layers);
    FIELD(splash_model_info, max_position_embeddings);
    FIELD(splash_model_info, has_mtp);
    FIELD(splash_model_info, has_vision);
    FIELD(splash_model_info, n_threads);
    FIELD(splash_model_info, max_step_tokens);
    FIELD(splash_model_info, weight_bytes);
    FIELD(splash_model_info, scratch_bytes);
    FIELD(splash_model_info, kv_bytes_per_token);
    FIELD(splash_model_info, state_bytes);
    FIELD(splash_model_info, decode_bytes_per_token);
    END();
    BEGIN(splash_sampling);
    FIELD(splash_sampling, temperature);
    FIELD(splash_sampling, top_p);
    FIELD(splash_sampling, top_k);
    FIELD(splash_sampling, min_p);
    FIELD(splash_sampling, presence_penalty);
    FIELD(splash_sampling, frequency_penalty);
    FIELD(splash_sampling, repetition_penalty);
    FIELD(splash_sampling, _pad);
    FIELD(splash_sampling, seed);
    END();
    BEGIN(splash_seq);
    FIELD(splash_seq, slot);
    FIELD(splash_seq, n_past);
    FIELD(splash_seq, n_tokens);
    FIELD(splash_seq, n_logits);
    FIELD(splash_seq, tokens);
    FIELD(splash_seq, pages);
    FIELD(splash_seq, n_pages);
    FIELD(splash_seq, sample);
    FIELD(splash_seq, sampling.temperature);
    FIELD(splash_seq, sampling.top_p);
    FIELD(splash_seq, sampling.top_k);
    FIELD(splash_seq, sampling.min_p);
    FIELD(splash_seq, sampling.presence_penalty);
    FIELD(splash_seq, sampling.frequency_penalty);
    FIELD(splash_seq, sampling.repetition_penalty);
    FIELD(splash_seq, sampling._pad);
    FIELD(splash_seq, sampling.seed);
    FIELD(splash_seq, penalty_tokens);
    FIELD(splash_seq, n_penalty_tokens);
    FIELD(splash_seq, n_top_logprobs);
    FIELD(splash_seq, allowed);
    FIELD(splash_seq, logits);
    FIELD(splash_seq, token);
    FIELD(splash_seq, logprob);
    FIELD(splash_seq, top_ids);
    FIELD(splash_seq, top_logprobs);
    END();
    BEGIN(splash_drafter_options);
    FIELD(splash_drafter_options, struct_size);
    FIELD(splash_drafter_options, kind);
    FIELD(splash_drafter_options, dir);
    FIELD(splash_drafter_options, max_draft);
    FIELD(splash_drafter_options, max_seqs);
    END();
    BEGIN(splash_drafter_info);
    FIELD(splash_drafter_info, struct_size);
    FIELD(splash_drafter_info, kind);
    FIELD(splash_drafter_info, max_draft);
    FIELD(splash_drafter_info, max_seqs);
    FIELD(splash_drafter_info, block_size);
    FIELD(splash_drafter_info, mask_token_id);
    FIELD(splash_drafter_info, weight_bytes);
    FIELD(splash_drafter_info, scratch_bytes);
    FIELD(splash_drafter_info, kv_bytes_per_token);
    FIELD(splash_drafter_info, state_bytes);
    END();
    BEGIN(splash_draft_seq);
    FIELD(splash_draft_seq, slot);
    FIELD(splash_draft_seq, n_past);
    FIELD(splash_draft_seq, anchor);
    FIELD(splash_draft_seq, n_draft);
    FIELD(splash_draft_seq, pages);
    FIELD(splash_draft_seq, n_pages);
    FIELD(splash_draft_seq, n_penalty_tokens);
    FIELD(splash_draft_seq, penalty_tokens);
    FIELD(splash_draft_seq, sampling.temperature);
    FIELD(splash_draft_seq, sampling.top_p);
    FIELD(splash_draft_seq, sampling.top_k);
    FIELD(splash_draft_seq, sampling.min_p);
    FIELD(splash_draft_seq, sampling.presence_penalty);
    FIELD(splash_draft_seq, sampling.frequency_penalty);
    FIELD(splash_draft_seq, sampling.repetition_penalty);
    FIELD(splash_draft_seq, sampling._pad);
    FIELD(splash_draft_seq, sampling.seed);
    FIELD(splash_draft_seq, tokens);
    FIELD(splash_draft_seq, logits);
    END();
    BEGIN(splash_verify);
    FIELD(splash_verify, n_draft);
    FIELD(splash_verify, n_proposed);
    FIELD(splash_verify, draft_index);
    FIELD(splash_verify, n_accepted);
    FIELD(splash_verify, allowed);
    FIELD(splash_verify, logprobs);
    FIELD(splash_verify, top_ids);
    FIELD(splash_verify, top_logprobs);
    END();
    printf("}\n");
    return 0;
}
