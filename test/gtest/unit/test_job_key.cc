/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of job key resolution (common/job_key.h): the precedence table
 * row by row, explicit keys used verbatim or refused (never rewritten),
 * the injective encoding of launcher values, and shortening with a hash so
 * that long values that differ never share a key.
 */
#include "uct/ib/rvt/common/job_key.h"
#include "uct/ib/rvt/common/attach_wire.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>

using namespace rvt;

namespace {

constexpr uid_t test_uid = 1234;

std::map<std::string, std::string> all_sources()
{
    return {{"RVT_JOB_KEY", "mine"},
            {"SLURM_JOB_ID", "77"},
            {"SLURM_STEP_ID", "3"},
            {"PMIX_NAMESPACE", "slurm.pmix.77.3"},
            {"OMPI_MCA_ess_base_jobid", "4242"}};
}

job_key_choice resolve_ok(std::map<std::string, std::string> vars)
{
    auto r = resolve_job_key(env_from(std::move(vars)), test_uid);
    EXPECT_TRUE(r.ok()) << r.error();
    if (!r.ok()) {
        return {};
    }
    EXPECT_EQ(wire::job_key_error(r.value().key), "") << r.value().key;
    return r.value();
}

std::string key_of(std::map<std::string, std::string> vars)
{
    return resolve_ok(std::move(vars)).key;
}

} // namespace

TEST(job_key, default_is_per_user)
{
    auto c = resolve_ok({});
    EXPECT_EQ(c.key, "user.1234");
    EXPECT_EQ(c.source, "default");
}

/* Remove the winner, one row at a time: the next row must win. */
TEST(job_key, precedence_row_by_row)
{
    auto vars = all_sources();
    auto c    = resolve_ok(vars);
    EXPECT_EQ(c.key, "mine");
    EXPECT_EQ(c.source, "RVT_JOB_KEY");

    vars.erase("RVT_JOB_KEY");
    c = resolve_ok(vars);
    EXPECT_EQ(c.key, "slurm.77");
    EXPECT_EQ(c.source, "SLURM_JOB_ID");

    vars.erase("SLURM_JOB_ID");
    c = resolve_ok(vars);
    EXPECT_EQ(c.key, "pmix.slurm.pmix.77.3");
    EXPECT_EQ(c.source, "PMIX_NAMESPACE");

    vars.erase("PMIX_NAMESPACE");
    c = resolve_ok(vars);
    EXPECT_EQ(c.key, "ompi.4242");
    EXPECT_EQ(c.source, "OMPI_MCA_ess_base_jobid");

    vars.erase("OMPI_MCA_ess_base_jobid");
    c = resolve_ok(vars);
    EXPECT_EQ(c.key, "user.1234");
    EXPECT_EQ(c.source, "default");
}

TEST(job_key, ucx_spelling_is_explicit_too)
{
    auto vars = all_sources();
    vars.erase("RVT_JOB_KEY");
    vars["UCX_RVT_JOB_KEY"] = "from-ucx";
    auto c                  = resolve_ok(vars);
    EXPECT_EQ(c.key, "from-ucx");
    EXPECT_EQ(c.source, "UCX_RVT_JOB_KEY");

    vars["RVT_JOB_KEY"] = "from-ucx"; /* same value: no conflict */
    EXPECT_EQ(key_of(vars), "from-ucx");
}

TEST(job_key, explicit_keys_that_disagree_are_refused)
{
    auto r = resolve_job_key(env_from({{"RVT_JOB_KEY", "a"},
                                       {"UCX_RVT_JOB_KEY", "b"}}),
                             test_uid);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("RVT_JOB_KEY='a'"), std::string::npos)
            << r.error();
    EXPECT_NE(r.error().find("UCX_RVT_JOB_KEY='b'"), std::string::npos)
            << r.error();
}

TEST(job_key, invalid_explicit_key_is_refused_not_rewritten)
{
    for (const char *bad : {"has space", "a/b", "x@y",
                            "0123456789012345678901234567890123456789"
                            "012345678901234567890123"}) {
        for (const char *name : {"RVT_JOB_KEY", "UCX_RVT_JOB_KEY"}) {
            auto vars = all_sources();
            vars.erase("RVT_JOB_KEY");
            vars[name] = bad;
            auto r     = resolve_job_key(env_from(vars), test_uid);
            ASSERT_FALSE(r.ok())
                    << name << "=" << bad << " gave " << r.value().key;
            EXPECT_EQ(r.error().rfind(std::string(name) + "='" + bad + "'", 0),
                      0u)
                    << r.error();
            EXPECT_NE(r.error().find("expected"), std::string::npos)
                    << r.error();
        }
    }
}

TEST(job_key, explicit_key_at_the_limit_is_kept)
{
    std::string key(63, 'k');
    EXPECT_EQ(key_of({{"RVT_JOB_KEY", key}}), key);
}

TEST(job_key, empty_counts_as_unset)
{
    auto c = resolve_ok({{"RVT_JOB_KEY", ""},
                         {"UCX_RVT_JOB_KEY", ""},
                         {"SLURM_JOB_ID", ""},
                         {"PMIX_NAMESPACE", "ns"}});
    EXPECT_EQ(c.key, "pmix.ns");
    EXPECT_EQ(c.source, "PMIX_NAMESPACE");

    c = resolve_ok({{"SLURM_JOB_ID", ""}, {"SLURM_JOBID", "9"}});
    EXPECT_EQ(c.key, "slurm.9");
    EXPECT_EQ(c.source, "SLURM_JOBID");
}

/* One MPI job under Slurm spans steps: mpirun in salloc or sbatch runs
 * its own node's ranks with no SLURM_STEP_ID and the other nodes' under
 * orteds it started with srun (step 0); srun's own tasks have a step; a
 * node's prolog has only the job. All must name the same agent. */
TEST(job_key, slurm_key_is_the_jobs_whatever_the_step)
{
    const std::string batch = key_of({{"SLURM_JOB_ID", "77"}});
    EXPECT_EQ(batch, "slurm.77");
    EXPECT_EQ(key_of({{"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "0"}}), batch);
    EXPECT_EQ(key_of({{"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "3"}}), batch);
    EXPECT_EQ(key_of({{"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", ""}}), batch);
    EXPECT_EQ(key_of({{"SLURM_JOBID", "77"}, {"SLURM_STEPID", "2"}}), batch);
    /* srun --mpi=pmix also sets PMIX_NAMESPACE, per step: Slurm wins */
    EXPECT_EQ(key_of({{"SLURM_JOB_ID", "77"},
                      {"SLURM_STEP_ID", "1"},
                      {"PMIX_NAMESPACE", "slurm.pmix.77.1"}}),
              batch);
    EXPECT_NE(key_of({{"SLURM_JOB_ID", "78"}, {"SLURM_STEP_ID", "0"}}), batch);
}

TEST(job_key, slurms_older_names_are_read_when_the_new_ones_are_unset)
{
    auto c = resolve_ok({{"SLURM_JOBID", "41"}});
    EXPECT_EQ(c.key, "slurm.41");
    EXPECT_EQ(c.source, "SLURM_JOBID");
    /* the current name wins where both are set */
    c = resolve_ok({{"SLURM_JOB_ID", "7"}, {"SLURM_JOBID", "41"}});
    EXPECT_EQ(c.key, "slurm.7");
}

TEST(job_key, slurm_step_without_job_is_ignored)
{
    auto c = resolve_ok(
            {{"SLURM_STEP_ID", "1"}, {"OMPI_MCA_ess_base_jobid", "5"}});
    EXPECT_EQ(c.key, "ompi.5");
}

TEST(job_key, launcher_values_are_encoded)
{
    /* PRRTE's namespaces have '@' */
    EXPECT_EQ(key_of({{"PMIX_NAMESPACE", "prterun-node1-4711@1"}}),
              "pmix.prterun-node1-4711+401");
    /* '+' and ':' are reserved for the encoding and the hash */
    EXPECT_EQ(key_of({{"PMIX_NAMESPACE", "a+b:c"}}), "pmix.a+2bb+3ac");
    EXPECT_EQ(key_of({{"OMPI_MCA_ess_base_jobid", "a b/\xff"}}),
              "ompi.a+20b+2f+ff");
    /* in Slurm's job id '.' is encoded too (job_key.h) */
    EXPECT_EQ(key_of({{"SLURM_JOB_ID", "1.2"}, {"SLURM_STEP_ID", "3"}}),
              "slurm.1+2e2");
}

TEST(job_key, encoding_keeps_different_values_apart)
{
    /* each would be "pmix.a_b" if bad characters simply became '_' */
    std::set<std::string> keys;
    for (const char *ns : {"a_b", "a@b", "a/b", "a b", "a+40b", "a:b"}) {
        keys.insert(key_of({{"PMIX_NAMESPACE", ns}}));
    }
    EXPECT_EQ(keys.size(), 6u);

    EXPECT_NE(key_of({{"SLURM_JOB_ID", "1.2"}}),
              key_of({{"SLURM_JOB_ID", "1+2e2"}}));
    EXPECT_NE(key_of({{"SLURM_JOB_ID", "1.2"}}),
              key_of({{"SLURM_JOB_ID", "1"}}));
}

TEST(job_key, long_values_are_shortened_with_a_hash)
{
    /* "pmix." + 58 = 63: kept whole; one more: shortened */
    std::string fits(58, 'n');
    EXPECT_EQ(key_of({{"PMIX_NAMESPACE", fits}}), "pmix." + fits);

    std::string a  = std::string(200, 'n') + "a";
    std::string b  = std::string(200, 'n') + "b";
    std::string ka = key_of({{"PMIX_NAMESPACE", a}});
    std::string kb = key_of({{"PMIX_NAMESPACE", b}});
    EXPECT_EQ(ka.size(), 63u);
    EXPECT_EQ(kb.size(), 63u);
    EXPECT_NE(ka, kb);
    EXPECT_EQ(ka.rfind("pmix.nnnn", 0), 0u) << ka;
    EXPECT_EQ(ka.find(':'), 46u) << ka;
    /* deterministic: every process of the job computes the same key */
    EXPECT_EQ(key_of({{"PMIX_NAMESPACE", a}}), ka);

    std::string just_over = key_of({{"PMIX_NAMESPACE", fits + "x"}});
    EXPECT_EQ(just_over.size(), 63u);
    EXPECT_NE(just_over, key_of({{"PMIX_NAMESPACE", fits + "y"}}));

    /* growth by encoding counts too: 20 '@' are 60 characters */
    std::string enc = key_of({{"PMIX_NAMESPACE", std::string(20, '@')}});
    EXPECT_EQ(enc.size(), 63u);
    EXPECT_NE(enc.find(':'), std::string::npos) << enc;
}

TEST(job_key, many_long_values_never_collide)
{
    std::set<std::string> keys;
    std::string prefix(100, 'p');
    for (int i = 0; i < 2000; ++i) {
        keys.insert(key_of({{"PMIX_NAMESPACE", prefix + std::to_string(i)}}));
    }
    EXPECT_EQ(keys.size(), 2000u);
}

TEST(job_key, any_launcher_bytes_give_a_valid_key)
{
    std::mt19937 rng(12345);
    std::uniform_int_distribution<int> len(1, 120), byte(1, 255);
    for (int i = 0; i < 500; ++i) {
        std::string v(size_t(len(rng)), '\0');
        for (char &c : v) {
            c = static_cast<char>(byte(rng));
        }
        for (const char *name :
             {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID"}) {
            auto r = resolve_job_key(env_from({{name, v}}), test_uid);
            ASSERT_TRUE(r.ok()) << r.error();
            EXPECT_EQ(wire::job_key_error(r.value().key), "") << r.value().key;
        }
    }
}

TEST(job_key, process_env_reads_the_environment)
{
    /* read only: the tests leave the process environment alone */
    auto env = process_env();
    for (const char *name : {"PATH", "RVT_SURELY_UNSET_VARIABLE_42"}) {
        const char *raw = std::getenv(name);
        EXPECT_EQ(env(name),
                  raw ? std::optional<std::string>(raw) : std::nullopt)
                << name;
    }
}
