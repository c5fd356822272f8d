// Package trinity reads and writes Trinity-RFT's SQL experience buffer (the
// table its explorer writes and its trainer reads, SQLite or PostgreSQL) as
// an experience store.
//
// Two layouts, told apart from the tables (Layout): Trinity-RFT 0.5 keeps
// each row's payload in the table's experience_bytes column; 0.6 keeps it in
// a <name>_blob table joined on id (read with one LEFT JOIN), and its
// payloads may hold routed_experts (MoE router replay, a store column).
//
// A table row holds the experience in its experience_bytes payload: the
// TRXP container, a pickle of plain Python values (decoded and written here:
// only the opcodes plain values use) and a safetensors block. Experience
// tables also have task_id, run_id, msg_id, reward and model_version
// columns, which override the payload's values on reading exactly as
// upstream's reader does (and info["model_version"] with them). Reading
// yields the store's columns (ids, reward, prompt_length, the token lists,
// truncate_status, model_version, info and metrics as JSON text) plus
// messages, tools, custom_fields (JSON text), prompt_text and
// response_text; DPO tables carry chosen, rejected and the two message
// lists instead of the per-token lists.
//
// Writing produces what upstream's writer produces: the same table (created
// with upstream's DDL when absent), one row per experience in store order,
// consumed = 0, and a payload upstream's reader accepts (a protocol-2 pickle
// without memo, the reference safetensors layout, int32 ids, float32 lists,
// a bool mask), in one transaction. Store columns a buffer row has no place
// for (duplicate_of, the trainer-side lists, unknown extras) are not
// written.
package trinity
