/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Defaults that more than one part of rvt states: the agent (rvtd's
 * options, its config structs, what it grants clients), the client
 * library and the UCT module (UCX config tables). Each is written here
 * once; everyone else reads it.
 *
 * UCX's config tables want a default as a string: the few they need are
 * macros too (RVT_DEFAULT_*), turned into that string by RVT_QUOTE, so the
 * table and the constant cannot disagree. The relations between these and
 * the shared-memory limits are asserted in shm_layout.h, next to the
 * limits.
 */
#ifndef RVT_COMMON_DEFAULTS_H
#define RVT_COMMON_DEFAULTS_H

#include <chrono>
#include <cstdint>

/* "8192" from RVT_DEFAULT_AM_SIZE: a macro's value as a string literal. */
#define RVT_QUOTE_(x) #x
#define RVT_QUOTE(x)  RVT_QUOTE_(x)

/* Largest active message, its header included, bytes: the agent's inbound
 * slot and receive buffer (rvtd --am-size) and the module's segment
 * (UCX_RVT_SEG_SIZE). */
#define RVT_DEFAULT_AM_SIZE 8192

/* How long a process waits for its agent (starting it, attaching, each
 * request for a remote node's peer), seconds (UCX_RVT_CONNECT_TIMEOUT). */
#define RVT_DEFAULT_CONNECT_TIMEOUT_S 20

namespace rvt::defaults {

/* Work requests per client work ring, entries (rvtd --work-ring). */
inline constexpr uint32_t work_ring = 256;

/* Completions per client completion ring, entries: a client's requests in
 * flight (rvtd --completion-ring). */
inline constexpr uint32_t completion_ring = 1024;

/* Inbound messages per client inbound ring, entries (rvtd
 * --inbound-ring). */
inline constexpr uint32_t inbound_ring = 256;

/* See RVT_DEFAULT_AM_SIZE, bytes. */
inline constexpr uint32_t am_size = RVT_DEFAULT_AM_SIZE;

/* Largest payload a work request carries inline (the work ring's data
 * slot; what the agent asks each RC QP to send inline), bytes (rvtd
 * --inline-size). */
inline constexpr uint32_t inline_size = 128;

/* K: the RC QPs an agent shares with each remote node, 1..conn::max_qps
 * (rvtd --num-qps; every agent of a job has the same, conn_wire.h). */
inline constexpr uint32_t num_qps = 4;

/* See RVT_DEFAULT_CONNECT_TIMEOUT_S. */
inline constexpr std::chrono::milliseconds connect_timeout =
        std::chrono::seconds(RVT_DEFAULT_CONNECT_TIMEOUT_S);

} // namespace rvt::defaults

#endif
