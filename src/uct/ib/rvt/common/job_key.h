/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which job a process belongs to, as one job key (attach_wire.h:
 * 1..63 characters of [A-Za-z0-9._:+-]). The key names the agent's socket
 * and lock (runtime_dir.h) and is checked at attach, so every process of a
 * job on a node, and the agent it starts, must arrive at the same key from
 * the same environment. The first rule that applies wins:
 *
 *   | # | variable(s)                    | key                  | source   |
 *   |---|--------------------------------|----------------------|----------|
 *   | 1 | RVT_JOB_KEY                    | the value, verbatim  | the name |
 *   |   | UCX_RVT_JOB_KEY                | the value, verbatim  | the name |
 *   | 2 | SLURM_JOB_ID (or the older     | slurm.<job>          | the name |
 *   |   | SLURM_JOBID)                   |                      |          |
 *   | 3 | PMIX_NAMESPACE                 | pmix.<namespace>     | the name |
 *   | 4 | OMPI_MCA_ess_base_jobid        | ompi.<id>            | the name |
 *   | 5 | (none of the above)            | user.<uid>           | default  |
 *
 * A variable set to the empty string counts as unset.
 *
 * Slurm's key is the job's, not the step's: the agent serves a job on a
 * node, and one job's ranks do not share a step. Under mpirun in salloc
 * or sbatch, the ranks on mpirun's own node are its children and have no
 * SLURM_STEP_ID, while those on the other nodes run under orteds that
 * mpirun started with srun (step 0, 1, ...): keyed by step, the agents of
 * one MPI job would refuse each other (wrong_job_key). A node's prolog,
 * which starts agents before any step (contrib/slurm/), knows only the
 * job id. Steps of one job, and one uid, share the job's agents.
 *
 * Explicit keys (1) are used as given or refused: an invalid one is an
 * error naming the variable, never rewritten, because a silently altered
 * key would put the process in a different job than its user asked for.
 * UCX_RVT_JOB_KEY is read too because the UCX module's config table has
 * the prefix RVT_, so its JOB_KEY knob is UCX_RVT_JOB_KEY in the
 * environment; UCX parses it for the module, but an agent started by the
 * module or by a launcher sees only the environment, and must agree. Both
 * set and different is an error (which one is meant is not ours to guess).
 *
 * Launcher values (2-4) are not ours to choose, so they are encoded, not
 * refused, and the encoding is injective: letters, digits, '.', '_' and
 * '-' stay; every other byte, '+' and ':' included, becomes "+xx" (two
 * lower-case hex digits). In Slurm's job id '.' is encoded too (as it was
 * when the key held the step after a '.'), so the key of a job stays
 * what it was. A key longer than
 * 63 characters keeps its first 46 and ends in ':' plus 16 hex digits of
 * a 64-bit FNV-1a hash of the whole encoded key; since an unshortened
 * derived key never contains ':', a shortened key can only meet another
 * shortened key, and then only on a hash collision.
 */
#ifndef RVT_COMMON_JOB_KEY_H
#define RVT_COMMON_JOB_KEY_H

#include "uct/ib/rvt/common/result.h"

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace rvt {

/* Reads one environment variable: its value, or nullopt when unset. Tests
 * pass a map (env_from) instead of touching the process environment. */
using env_view = std::function<std::optional<std::string>(const char *name)>;

/* The process environment, through getenv(). */
env_view process_env();

/* A fixed environment: exactly the variables in vars. */
env_view env_from(std::map<std::string, std::string> vars);

struct job_key_choice {
    std::string key; /* passes wire::job_key_error */
    std::string source; /* variable(s) it came from, or "default" */
};

result<job_key_choice> resolve_job_key(const env_view &env, uid_t uid);

} // namespace rvt

#endif
