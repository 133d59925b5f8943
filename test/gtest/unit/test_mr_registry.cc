/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the clients' MR registry (agent/engine/mr_registry.h), one or
 * more per row of its table: events in, actions out, no device and no
 * socket. The test plays the engine: it feeds the events and, where a row
 * needs it, reports deregistrations with deregistered(). Time is a number
 * the test advances.
 */
#include "uct/ib/rvt/agent/engine/mr_registry.h"
#include "test/gtest/unit/mr_driver.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using rvt::failure;
using rvt::result;
using rvt::work_request;
using rvt::agent::client_mr;
using rvt::agent::client_set;
using rvt::agent::device_mr;
using rvt::agent::mr_action;
using rvt::agent::mr_action_kind;
using rvt::agent::mr_actions;
using rvt::agent::mr_registry;
using rvt::test::mr_driver;
using namespace std::chrono_literals;

namespace {

const mr_registry::time_point t0 = mr_registry::time_point{} + 1h;
constexpr auto grace             = 100ms;

/* lkeys are unique among live MRs, as the kernel makes them */
client_mr mr(uint32_t handle)
{
    return {handle, 1000 + handle, 2000 + handle, 0x100000 * handle, 4096};
}

/* Client `index`'s work ring holds requests (releases_due). */
client_set ring_busy(uint32_t index)
{
    client_set busy;
    busy.insert(index);
    return busy;
}

/* What the device says of mr(handle): a client's MR, as announced. */
device_mr on_device(uint32_t handle)
{
    return {device_mr::owner::client, mr(handle)};
}

/* An op of the client's reading from MR `handle`. */
work_request op_on(uint32_t handle)
{
    work_request wr{};
    wr.length = 8;
    wr.lkey   = 1000 + handle;
    return wr;
}

bool is(const mr_action &a, mr_action_kind kind, uint32_t handle)
{
    return a.kind == kind && a.handle == handle;
}

/* The actions of one kind. */
mr_actions only(const mr_actions &acts, mr_action_kind kind)
{
    mr_actions out;
    for (const auto &a : acts) {
        if (a.kind == kind) {
            out.push_back(a);
        }
    }
    return out;
}

class mr_registry_test : public ::testing::Test {
protected:
    mr_registry reg{8, grace};

    void SetUp() override
    {
        reg.attached(0);
        reg.attached(1);
    }

    /* Client `index` says it will register mr(handle), then announces
     * it, and the device agrees: accepted. */
    void announce(uint32_t index, uint32_t handle)
    {
        const client_mr m = mr(handle);
        EXPECT_TRUE(reg.intended(index, m.addr, m.length).empty());
        EXPECT_TRUE(reg.announced(index, m, on_device(handle)).empty());
        ASSERT_EQ(reg.mrs_of(index).count(1000 + handle), 1u);
    }

    /* A release that must come back as exactly one deregister. */
    void
    expect_deregister(const mr_actions &acts, uint32_t index, uint32_t handle)
    {
        ASSERT_EQ(acts.size(), 1u);
        EXPECT_TRUE(is(acts[0], mr_action_kind::deregister, handle));
        EXPECT_EQ(acts[0].index, index);
    }

    /* A refusal: a note naming `why`, and an answer iff `answer`. */
    void expect_refused(const mr_actions &acts, uint32_t index, uint32_t handle,
                        bool answer, const std::string &why)
    {
        EXPECT_TRUE(only(acts, mr_action_kind::deregister).empty())
                << "a refused release deregistered something";
        auto notes = only(acts, mr_action_kind::note);
        ASSERT_EQ(notes.size(), 1u);
        EXPECT_NE(notes[0].text.find(why), std::string::npos) << notes[0].text;
        auto answers = only(acts, mr_action_kind::answer_release);
        ASSERT_EQ(answers.size(), answer ? 1u : 0u);
        if (answer) {
            EXPECT_EQ(answers[0].index, index);
            EXPECT_EQ(answers[0].handle, handle);
            EXPECT_NE(answers[0].text.find(why), std::string::npos)
                    << answers[0].text;
        }
    }
};

/* ---- announced ------------------------------------------------------- */

TEST_F(mr_registry_test, an_announced_mr_is_checked_for_its_client_only)
{
    announce(0, 5);
    const auto &m = reg.mrs_of(0).at(1005);
    EXPECT_EQ(m.handle, 5u);
    EXPECT_EQ(m.rkey, 2005u);
    EXPECT_EQ(m.addr, 0x500000u);
    EXPECT_EQ(m.length, 4096u);
    EXPECT_EQ(reg.held_by(0), 1u);
    EXPECT_TRUE(reg.mrs_of(1).empty());
}

TEST_F(mr_registry_test, a_claim_on_a_known_handle_is_refused)
{
    announce(0, 6);
    /* a neighbour, and the owner again; the device agrees with both */
    for (uint32_t who : {1u, 0u}) {
        EXPECT_TRUE(reg.intended(who, mr(6).addr, mr(6).length).empty());
        auto acts = reg.announced(who, mr(6), on_device(6));
        ASSERT_EQ(acts.size(), 1u);
        EXPECT_EQ(acts[0].kind, mr_action_kind::note);
        EXPECT_NE(acts[0].text.find(
                          who == 1 ? "announced MR handle 6: client index 0 "
                                     "holds it: refused" :
                                     "announced MR handle 6: this client "
                                     "holds it already: refused"),
                  std::string::npos)
                << acts[0].text;
    }
    EXPECT_EQ(reg.mrs_of(1).count(1006), 0u);
    EXPECT_EQ(reg.mrs_of(0).count(1006), 1u) << "the owner's record changed";
    EXPECT_EQ(reg.intents_pending(), 2u) << "a refusal took an intent";
}

/* An announcement the registry refuses: one note naming the client, the
 * handle and `why`, the same reason in the answer, and nothing changed. */
void expect_announce_refused(const mr_registry &reg, const mr_actions &acts,
                             uint32_t index, uint32_t handle,
                             const std::string &why)
{
    ASSERT_EQ(acts.size(), 2u);
    EXPECT_EQ(acts[0].kind, mr_action_kind::note);
    EXPECT_NE(acts[0].text.find("client index " + std::to_string(index) +
                                " announced MR handle " +
                                std::to_string(handle) + ": " + why +
                                ": refused"),
              std::string::npos)
            << acts[0].text;
    EXPECT_TRUE(is(acts[1], mr_action_kind::answer_announce, handle));
    EXPECT_EQ(acts[1].index, index);
    EXPECT_NE(acts[1].text.find(why), std::string::npos) << acts[1].text;
    EXPECT_FALSE(reg.knows(handle));
}

TEST_F(mr_registry_test, one_of_the_agents_own_mrs_is_refused)
{
    reg.intended(0, mr(3).addr, mr(3).length);
    expect_announce_refused(reg,
                            reg.announced(0, mr(3),
                                          {device_mr::owner::agent, mr(3)},
                                          true),
                            0, 3, "it is one of the agent's own MRs");
    EXPECT_TRUE(reg.mrs_of(0).empty());
}

TEST_F(mr_registry_test, a_handle_the_device_does_not_have_raises_nothing)
{
    announce(0, 5);
    const uint32_t huge = 0xfffffff0;
    client_mr made_up   = mr(5);
    made_up.handle      = huge;
    reg.intended(0, made_up.addr, made_up.length);
    expect_announce_refused(reg, reg.announced(0, made_up, {}, true), 0, huge,
                            "no MR in the agent's PD has that handle");
    EXPECT_EQ(reg.highest_handle(), 5u)
            << "a refused handle would make the sweep look that far";
    announce(0, 7);
    EXPECT_EQ(reg.highest_handle(), 7u) << "an accepted one raises it";
}

TEST_F(mr_registry_test,
       values_the_device_disagrees_with_are_refused_naming_both)
{
    announce(1, 9); /* the neighbour's MR, whose values a thief can learn */
    struct lie {
        client_mr announced;
        std::string why;
    };
    const client_mr real = mr(5);
    std::vector<lie> lies;
    lies.push_back({real, "lkey 0x3f1 announced, the device's is 0x3ed"});
    lies.back().announced.lkey = mr(9).lkey; /* the neighbour's lkey */
    lies.push_back({real, "rkey 0x7d1 announced, the device's is 0x7d5"});
    lies.back().announced.rkey = 2001;
    lies.push_back({real, "address 0x900000 announced, the device's is "
                          "0x500000"});
    lies.back().announced.addr = mr(9).addr; /* the neighbour's memory */
    lies.push_back({real, "length 1048576 announced, the device's is 4096"});
    lies.back().announced.length = 1 << 20;
    lies.push_back({real, "lkey 0x3f1 announced, the device's is 0x3ed; "
                          "address 0x900000 announced, the device's is "
                          "0x500000"});
    lies.back().announced.lkey = mr(9).lkey;
    lies.back().announced.addr = mr(9).addr;
    for (const lie &l : lies) {
        reg.intended(0, l.announced.addr, l.announced.length);
        expect_announce_refused(reg,
                                reg.announced(0, l.announced, on_device(5),
                                              true),
                                0, 5, l.why);
    }
    EXPECT_TRUE(reg.mrs_of(0).empty());
    EXPECT_EQ(reg.mrs_of(1).size(), 1u);
    announce(0, 5); /* the truth is accepted */
}

TEST_F(mr_registry_test, an_mr_its_client_never_meant_to_register_is_refused)
{
    /* another client's intent is not this one's */
    reg.intended(1, mr(5).addr, mr(5).length);
    expect_announce_refused(reg, reg.announced(0, mr(5), on_device(5), true), 0,
                            5,
                            "this client never said it would register 4096 "
                            "bytes at 0x500000 (no mr_intent)");
    EXPECT_EQ(reg.intents_pending(), 1u);
    /* without an answer asked for: only the note */
    EXPECT_EQ(reg.announced(0, mr(5), on_device(5)).size(), 1u);
}

/* ---- release_requested ------------------------------------------------ */

TEST_F(mr_registry_test, an_unused_release_deregisters_and_answers_after)
{
    announce(0, 5);
    auto acts = reg.release_requested(0, 5, true, false);
    expect_deregister(acts, 0, 5);
    EXPECT_EQ(reg.mrs_of(0).count(1005), 1u)
            << "forgotten before the device dropped it";
    acts = reg.deregistered(5, 5u);
    ASSERT_EQ(acts.size(), 1u);
    EXPECT_TRUE(is(acts[0], mr_action_kind::answer_release, 5));
    EXPECT_EQ(acts[0].index, 0u);
    EXPECT_TRUE(acts[0].text.empty()) << "refused: " << acts[0].text;
    EXPECT_TRUE(reg.mrs_of(0).empty());
    EXPECT_EQ(reg.counters().released, 1u);
    EXPECT_EQ(reg.counters().deferred, 0u);
    EXPECT_TRUE(reg.idle());
}

TEST_F(mr_registry_test, a_release_without_a_wish_for_an_answer_gets_none)
{
    announce(0, 5);
    expect_deregister(reg.release_requested(0, 5, false, false), 0, 5);
    EXPECT_TRUE(reg.deregistered(5, 5u).empty());
    EXPECT_EQ(reg.counters().released, 1u);
}

TEST_F(mr_registry_test, a_release_waits_for_the_work_still_in_the_ring)
{
    announce(0, 5);
    EXPECT_TRUE(reg.release_requested(0, 5, true, true).empty());
    EXPECT_EQ(reg.counters().deferred, 1u);
    EXPECT_EQ(reg.releases_waiting(), 1u);
    EXPECT_FALSE(reg.idle());
    EXPECT_EQ(reg.mrs_of(0).count(1005), 1u)
            << "the work in the ring is checked against it";
    EXPECT_TRUE(reg.releases_due(ring_busy(0)).empty());
    expect_deregister(reg.releases_due({}), 0, 5);
    EXPECT_EQ(reg.releases_waiting(), 0u);
    auto acts = reg.deregistered(5, 5u);
    ASSERT_EQ(acts.size(), 1u);
    EXPECT_TRUE(is(acts[0], mr_action_kind::answer_release, 5));
    EXPECT_EQ(reg.counters().released, 1u);
}

TEST_F(mr_registry_test, a_release_waits_for_the_ops_that_name_the_mr)
{
    announce(0, 5);
    announce(0, 6);
    announce(1, 7);
    work_request am = op_on(9); /* payload elsewhere, head in MR 5 */
    am.head_length  = 16;
    am.head_lkey    = 1005;
    reg.op_queued(0, am);
    reg.op_queued(0, op_on(6));
    reg.op_queued(0, op_on(6));
    reg.op_queued(1, op_on(5)); /* another client's op on that lkey */
    EXPECT_TRUE(reg.release_requested(0, 5, true, false).empty());
    EXPECT_TRUE(reg.release_requested(0, 6, true, false).empty());
    expect_deregister(reg.release_requested(1, 7, true, false), 1, 7);
    const client_set idle_ring;
    EXPECT_TRUE(reg.releases_due(idle_ring).empty());
    reg.op_done(0, am);
    reg.op_done(0, op_on(6));
    expect_deregister(reg.releases_due(idle_ring), 0, 5);
    reg.op_done(0, op_on(6));
    expect_deregister(reg.releases_due(idle_ring), 0, 6);
    EXPECT_EQ(reg.counters().deferred, 2u);
}

TEST_F(mr_registry_test, a_second_release_of_one_mr_is_refused)
{
    announce(0, 5);
    announce(0, 6);
    EXPECT_TRUE(reg.release_requested(0, 5, true, true).empty()); /* deferred */
    expect_refused(reg.release_requested(0, 5, true, false), 0, 5, true,
                   "MR handle 5 is being released already");
    expect_deregister(reg.release_requested(0, 6, false, false), 0, 6);
    expect_refused(reg.release_requested(0, 6, false, false), 0, 6, false,
                   "MR handle 6 is being released already");
    EXPECT_EQ(reg.releases_waiting(), 1u);
}

TEST_F(mr_registry_test, a_release_of_a_handle_not_the_clients_is_refused)
{
    announce(0, 5);
    expect_refused(reg.release_requested(1, 77, true, false), 1, 77, true,
                   "MR handle 77 is not this client's: nothing deregistered");
    expect_refused(reg.release_requested(1, 5, false, false), 1, 5, false,
                   "MR handle 5 is not this client's");
    EXPECT_EQ(reg.mrs_of(0).count(1005), 1u);
    EXPECT_EQ(reg.counters().released, 0u);
}

/* ---- deregistered ------------------------------------------------------ */

TEST_F(mr_registry_test, a_handle_is_forgotten_only_once_deregistered)
{
    announce(0, 33);
    expect_deregister(reg.release_requested(0, 33, false, false), 0, 33);
    /* still the agent's to deregister: a claim now is a confused client */
    EXPECT_EQ(reg.announced(1, mr(33), on_device(33)).size(), 1u);
    EXPECT_TRUE(reg.deregistered(33, 33u).empty());
    /* the kernel may now give 33 to anyone */
    announce(1, 33);
}

TEST_F(mr_registry_test, a_refused_deregistration_is_answered_and_counted)
{
    announce(0, 41);
    expect_deregister(reg.release_requested(0, 41, true, false), 0, 41);
    auto acts = reg.deregistered(
            41, failure{"DEREG_MR of handle 41: Device or resource busy"});
    auto answers = only(acts, mr_action_kind::answer_release);
    ASSERT_EQ(answers.size(), 1u);
    EXPECT_NE(answers[0].text.find("Device or resource busy"),
              std::string::npos);
    EXPECT_EQ(only(acts, mr_action_kind::note).size(), 1u);
    EXPECT_EQ(reg.counters().leaked, 1u);
    EXPECT_EQ(reg.counters().released, 0u);
    EXPECT_TRUE(reg.mrs_of(0).empty())
            << "the client is done with it: forgotten all the same";
}

TEST_F(mr_registry_test, an_outcome_nobody_waits_for_changes_nothing)
{
    announce(0, 5);
    EXPECT_TRUE(reg.deregistered(5, 5u).empty()) << "a live MR";
    EXPECT_TRUE(reg.deregistered(99, 99u).empty()) << "an unknown one";
    EXPECT_EQ(reg.mrs_of(0).count(1005), 1u);
    EXPECT_EQ(reg.counters().released, 0u);
}

/* ---- attached ---------------------------------------------------------- */

TEST_F(mr_registry_test, a_new_holder_of_an_index_starts_with_no_uses)
{
    /* the dead holder's ops on lkey 1005 end after it is gone, and before
     * and after the new holder of the index takes it: none of this may
     * show in the new holder's uses */
    reg.op_queued(0, op_on(5));
    reg.op_queued(0, op_on(5));
    reg.op_queued(0, op_on(5));
    reg.client_gone(0, 1, 0);
    reg.op_done(0, op_on(5));
    reg.attached(0);
    announce(0, 5);
    reg.op_queued(0, op_on(5));
    EXPECT_TRUE(reg.release_requested(0, 5, false, false).empty())
            << "released under the new holder's op";
    reg.op_done(0, op_on(5));
    expect_deregister(reg.releases_due({}), 0, 5);
}

/* ---- client_gone, gone_op_retired, tick ------------------------------- */

TEST_F(mr_registry_test, a_dead_clients_mrs_go_after_its_ops_and_the_grace)
{
    announce(0, 5);
    announce(0, 6);
    announce(1, 8);
    EXPECT_TRUE(reg.release_requested(0, 6, true, true).empty()); /* put off */
    reg.client_gone(0, 1, 2);
    EXPECT_TRUE(reg.mrs_of(0).empty());
    EXPECT_EQ(reg.releases_waiting(), 0u) << "its release went with it";
    EXPECT_EQ(reg.gone_waiting(), 1u);
    EXPECT_FALSE(reg.idle());

    EXPECT_TRUE(reg.tick(t0).empty());
    EXPECT_FALSE(reg.next_timer()) << "due before its ops are done";
    reg.gone_op_retired(0, 1);
    EXPECT_TRUE(reg.tick(t0 + 1h).empty()) << "one op still posted";
    reg.gone_op_retired(0, 1);
    EXPECT_TRUE(reg.tick(t0 + 2h).empty()) << "the grace starts now";
    ASSERT_TRUE(reg.next_timer());
    EXPECT_EQ(*reg.next_timer(), t0 + 2h + grace);
    EXPECT_TRUE(reg.tick(t0 + 2h + grace - 1ms).empty());

    auto acts = reg.tick(t0 + 2h + grace);
    ASSERT_EQ(acts.size(), 2u);
    EXPECT_TRUE(is(acts[0], mr_action_kind::deregister, 5));
    EXPECT_TRUE(is(acts[1], mr_action_kind::deregister, 6));
    EXPECT_FALSE(reg.next_timer()) << "due again while deregistering";
    EXPECT_TRUE(reg.tick(t0 + 3h).empty()) << "deregistered twice";
    EXPECT_TRUE(reg.deregistered(5, 5u).empty());
    acts = reg.deregistered(6, 6u);
    ASSERT_EQ(acts.size(), 1u);
    EXPECT_EQ(acts[0].kind, mr_action_kind::note);
    EXPECT_NE(acts[0].text.find("client index 0 is gone: deregistered 2 of "
                                "its 2 MRs"),
              std::string::npos)
            << acts[0].text;
    EXPECT_EQ(reg.counters().cleaned, 2u);
    EXPECT_EQ(reg.counters().released, 0u);
    EXPECT_EQ(reg.gone_waiting(), 0u);
    EXPECT_EQ(reg.mrs_of(1).count(1008), 1u) << "the neighbour's MR";
    EXPECT_TRUE(reg.idle());
}

TEST_F(mr_registry_test, a_reused_index_does_not_free_the_dead_ones_mrs_early)
{
    announce(0, 5);
    reg.client_gone(0, 1, 1);
    reg.attached(0); /* a new client, generation 2, takes index 0 */
    /* its handle 5 is still the dead client's: neither claimable nor
     * releasable by the new holder of the index */
    EXPECT_EQ(reg.announced(0, mr(5), on_device(5)).size(), 1u);
    expect_refused(reg.release_requested(0, 5, true, false), 0, 5, true,
                   "not this client's");
    reg.gone_op_retired(0, 2); /* the new client's op */
    EXPECT_TRUE(reg.tick(t0).empty());
    EXPECT_TRUE(reg.tick(t0 + 1h).empty());
    reg.gone_op_retired(0, 1);
    EXPECT_TRUE(reg.tick(t0 + 2h).empty());
    expect_deregister(reg.tick(t0 + 2h + grace), 0, 5);
}

TEST_F(mr_registry_test, two_dead_holders_of_one_index_are_cleaned_apart)
{
    announce(0, 5);
    reg.client_gone(0, 1, 1);
    reg.attached(0);
    announce(0, 6);
    reg.client_gone(0, 2, 0);
    EXPECT_TRUE(reg.tick(t0).empty());
    expect_deregister(reg.tick(t0 + grace), 0, 6);
    auto acts = reg.deregistered(6, 6u);
    ASSERT_EQ(acts.size(), 1u);
    EXPECT_NE(acts[0].text.find("deregistered 1 of its 1 MRs"),
              std::string::npos);
    EXPECT_EQ(reg.gone_waiting(), 1u) << "the first holder still waits";
    reg.gone_op_retired(0, 1);
    EXPECT_TRUE(reg.tick(t0 + grace).empty());
    expect_deregister(reg.tick(t0 + 2 * grace), 0, 5);
}

/* Each note says what it is about (mr_note): a client can cause every
 * kind, and the engine logs each kind at its 1st, 2nd, 4th, ... note
 * (engine.h, "Log lines"). */
TEST_F(mr_registry_test, each_note_says_what_it_is_about)
{
    using rvt::agent::mr_note;
    auto about = [](const mr_actions &acts) {
        const mr_actions notes = only(acts, mr_action_kind::note);
        EXPECT_EQ(notes.size(), 1u);
        for (const auto &a : acts) {
            if (a.kind != mr_action_kind::note) {
                EXPECT_EQ(a.about, mr_note::none) << "only notes have one";
            }
        }
        return notes.empty() ? mr_note::none : notes[0].about;
    };
    EXPECT_EQ(about(reg.announced(0, mr(5), device_mr{}, true)),
              mr_note::announcement);
    announce(0, 6);
    EXPECT_EQ(about(reg.release_requested(1, 6, true, false)),
              mr_note::release);
    reg.attached(2);
    reg.joined(2, 0);
    EXPECT_EQ(about(reg.intended(2, 0x1000, 4096)), mr_note::intent);
    reg.client_gone(1, 1, 0);
    EXPECT_TRUE(reg.tick(t0).empty());
    EXPECT_EQ(about(reg.tick(t0 + grace)), mr_note::departure);
}

TEST_F(mr_registry_test, a_dead_client_without_mrs_is_noted_and_dropped)
{
    reg.client_gone(1, 1, 0);
    EXPECT_TRUE(reg.tick(t0).empty());
    auto acts = reg.tick(t0 + grace);
    ASSERT_EQ(acts.size(), 1u);
    EXPECT_EQ(acts[0].kind, mr_action_kind::note);
    EXPECT_NE(acts[0].text.find("client index 1 is gone: deregistered 0 of "
                                "its 0 MRs"),
              std::string::npos);
    EXPECT_TRUE(reg.idle());
}

TEST_F(mr_registry_test, a_dead_clients_refused_deregistration_is_a_leak)
{
    announce(0, 5);
    reg.client_gone(0, 1, 0);
    reg.tick(t0);
    expect_deregister(reg.tick(t0 + grace), 0, 5);
    auto acts = reg.deregistered(5, failure{"DEREG_MR: Invalid argument"});
    ASSERT_EQ(acts.size(), 2u);
    EXPECT_NE(acts[0].text.find("Invalid argument"), std::string::npos);
    EXPECT_NE(acts[1].text.find("deregistered 0 of its 1 MRs"),
              std::string::npos);
    EXPECT_EQ(reg.counters().leaked, 1u);
    EXPECT_EQ(reg.counters().cleaned, 0u);
    EXPECT_TRUE(reg.idle());
}

TEST_F(mr_registry_test, a_client_that_dies_while_its_mr_goes_is_not_answered)
{
    announce(0, 5);
    expect_deregister(reg.release_requested(0, 5, true, false), 0, 5);
    reg.client_gone(0, 1, 0);
    EXPECT_TRUE(reg.deregistered(5, 5u).empty()) << "an answer to the dead";
    EXPECT_EQ(reg.counters().released, 1u);
    auto acts = reg.tick(t0 + grace);
    EXPECT_TRUE(only(acts, mr_action_kind::deregister).empty())
            << "deregistered twice";
}

/* ---- on_notice and the executor ---------------------------------------- */

TEST_F(mr_registry_test, a_notice_off_the_socket_is_an_announce_or_release)
{
    std::vector<uint32_t> asked; /* handles the device was asked about */
    /* as the engine does: the device is asked when the registry reads it */
    const auto notice = [&](const rvt::wire::mr_notice &n, bool busy) {
        device_mr device{};
        if (mr_registry::asks_device(n)) {
            asked.push_back(n.handle);
            device = on_device(n.handle);
        }
        return reg.on_notice(0, n, busy, device);
    };
    auto n = rvt::wire::make_mr_intent(0x500000, 4096);
    EXPECT_TRUE(notice(n, false).empty());
    n = rvt::wire::make_mr_notice(rvt::wire::msg_type::mr_registered, 5, 1005,
                                  2005, 0x500000, 4096,
                                  rvt::wire::mr_registered_reply_wanted);
    auto answer = notice(n, false);
    ASSERT_EQ(answer.size(), 1u);
    EXPECT_TRUE(is(answer[0], mr_action_kind::answer_announce, 5));
    EXPECT_EQ(answer[0].index, 0u);
    EXPECT_TRUE(answer[0].text.empty()) << "refused: " << answer[0].text;
    EXPECT_EQ(reg.mrs_of(0).count(1005), 1u);
    n = rvt::wire::make_mr_notice(rvt::wire::msg_type::mr_release, 5, 1005,
                                  2005, 0x500000, 4096,
                                  rvt::wire::mr_release_reply_wanted);
    EXPECT_TRUE(notice(n, true).empty()) << "the ring is busy";
    EXPECT_EQ(asked, std::vector<uint32_t>{5}) << "asked about a release";
    expect_deregister(reg.releases_due({}), 0, 5);
    auto acts = reg.deregistered(5, 5u);
    ASSERT_EQ(acts.size(), 1u) << "the wish for an answer was lost";
}

TEST_F(mr_registry_test, the_executor_feeds_each_outcome_back_in_order)
{
    announce(0, 5);
    announce(0, 6);
    std::vector<std::string> seen;
    const mr_driver exec{
            [&](uint32_t handle) -> result<uint32_t> {
                seen.push_back("dereg " + std::to_string(handle));
                if (handle == 6) {
                    return failure{"busy"};
                }
                return handle;
            },
            [&](uint32_t index, uint32_t handle, const std::string &refusal) {
                seen.push_back("answer " + std::to_string(index) + "/" +
                               std::to_string(handle) + " " + refusal);
            },
            [&](std::string_view line) {
                seen.push_back("log " + std::string(line));
            },
            [] { return std::vector<client_mr>{}; },
            [&](uint32_t index, uint32_t handle, const std::string &refusal) {
                seen.push_back("verdict " + std::to_string(index) + "/" +
                               std::to_string(handle) + " " + refusal);
            }};
    mr_actions acts = reg.release_requested(0, 5, true, false);
    auto more       = reg.release_requested(0, 6, true, false);
    acts.insert(acts.end(), more.begin(), more.end());
    more = reg.announced(0, mr(7), {}, true); /* no such MR */
    acts.insert(acts.end(), more.begin(), more.end());
    exec.run(reg, acts);
    const std::vector<std::string> want{
            "dereg 5",
            "answer 0/5 ",
            "dereg 6",
            "log client index 0: busy",
            "answer 0/6 busy",
            "log client index 0 announced MR handle 7: no MR in the agent's "
            "PD has that handle: refused",
            "verdict 0/7 no MR in the agent's PD has that handle"};
    EXPECT_EQ(seen, want);
    EXPECT_TRUE(reg.mrs_of(0).empty());
}

/* ---- groups: joined ---------------------------------------------------- */

const client_set nothing_busy;

/* A sibling's work is checked against its leader's MRs; it announces none
 * of its own, and may not release its leader's. */
TEST_F(mr_registry_test, a_siblings_work_is_checked_against_its_leaders_mrs)
{
    announce(0, 5);
    reg.attached(2);
    reg.joined(2, 0);
    EXPECT_EQ(reg.owner_of(2), 0u);
    EXPECT_EQ(reg.owner_of(1), 1u);
    EXPECT_EQ(reg.mrs_of(2).count(1005), 1u);
    EXPECT_EQ(reg.mrs_of(1).count(1005), 0u) << "another client's";

    auto acts = reg.announced(2, mr(9), on_device(9), true);
    ASSERT_EQ(acts.size(), 2u);
    EXPECT_NE(acts[0].text.find("client index 2 announced MR handle 9: this "
                                "client is a sibling of index 0, which "
                                "announces its MRs: refused"),
              std::string::npos)
            << acts[0].text;
    EXPECT_TRUE(is(acts[1], mr_action_kind::answer_announce, 9));
    EXPECT_EQ(reg.mrs_of(2).count(1009), 0u);
    expect_refused(reg.release_requested(2, 5, true, false), 2, 5, true,
                   "not this client's");
    EXPECT_EQ(reg.mrs_of(0).count(1005), 1u);
}

/* The leader's release waits for a live sibling's ops on the MR and for
 * work in the sibling's ring. */
TEST_F(mr_registry_test, a_leaders_release_waits_for_its_siblings)
{
    announce(0, 5);
    reg.attached(2);
    reg.joined(2, 0);
    reg.op_queued(2, op_on(5));
    EXPECT_TRUE(reg.release_requested(0, 5, true, false).empty());
    EXPECT_EQ(reg.releases_waiting(), 1u);
    EXPECT_TRUE(reg.releases_due(nothing_busy).empty())
            << "released under a sibling's op";
    reg.op_done(2, op_on(5));
    EXPECT_TRUE(reg.releases_due(ring_busy(2)).empty())
            << "released with work in a sibling's ring";
    expect_deregister(reg.releases_due(nothing_busy), 0, 5);
}

/* rings_asked: the clients with deferred releases, and their live
 * siblings. */
TEST_F(mr_registry_test, the_rings_asked_are_the_deferred_groups)
{
    announce(0, 5);
    announce(1, 6);
    reg.attached(2);
    reg.joined(2, 0);
    reg.attached(3);
    reg.joined(3, 1); /* client 1 releases nothing */
    EXPECT_TRUE(reg.rings_asked().empty());
    EXPECT_TRUE(reg.release_requested(0, 5, true, false).empty());
    const client_set asked = reg.rings_asked();
    EXPECT_TRUE(asked.contains(0));
    EXPECT_TRUE(asked.contains(2)) << "its sibling's ring may name it";
    EXPECT_FALSE(asked.contains(1));
    EXPECT_FALSE(asked.contains(3));
    expect_deregister(reg.releases_due(nothing_busy), 0, 5);
    EXPECT_TRUE(reg.rings_asked().empty());
}

/* ... and for a gone sibling's posted ops. */
TEST_F(mr_registry_test, a_leaders_release_waits_for_a_gone_siblings_ops)
{
    announce(0, 5);
    reg.attached(2);
    reg.joined(2, 0);
    reg.client_gone(2, 1, 1);
    EXPECT_TRUE(reg.release_requested(0, 5, true, false).empty());
    EXPECT_TRUE(reg.releases_due(nothing_busy).empty())
            << "released under a gone sibling's posted op";
    reg.gone_op_retired(2, 1);
    expect_deregister(reg.releases_due(nothing_busy), 0, 5);
    /* with no sibling left, a release is at once */
    announce(0, 6);
    expect_deregister(reg.release_requested(0, 6, false, false), 0, 6);
}

/* A dead leader's MRs wait for its siblings: those still attached, and
 * the posted ops of those gone. */
TEST_F(mr_registry_test, a_dead_leaders_mrs_wait_for_its_siblings_ops)
{
    announce(0, 5);
    reg.attached(2);
    reg.joined(2, 0);
    reg.client_gone(0, 1, 0);
    EXPECT_TRUE(reg.tick(t0).empty());
    EXPECT_FALSE(reg.next_timer()) << "due while a sibling is attached";
    reg.client_gone(2, 1, 1);
    EXPECT_TRUE(reg.tick(t0 + 1h).empty());
    EXPECT_TRUE(only(reg.tick(t0 + 2h), mr_action_kind::deregister).empty())
            << "the dead leader's MR went under its sibling's posted op";
    reg.gone_op_retired(2, 1);
    EXPECT_TRUE(only(reg.tick(t0 + 3h), mr_action_kind::deregister).empty())
            << "the grace starts now";
    auto acts = only(reg.tick(t0 + 3h + grace), mr_action_kind::deregister);
    ASSERT_EQ(acts.size(), 1u);
    EXPECT_TRUE(is(acts[0], mr_action_kind::deregister, 5));
}

/* A new holder of the leader's index is no leader of the old siblings:
 * its releases do not wait for them. */
TEST_F(mr_registry_test, a_new_holder_of_a_leaders_index_has_no_siblings)
{
    reg.attached(2);
    reg.joined(2, 0);
    reg.client_gone(0, 1, 0);
    reg.client_gone(2, 1, 1); /* its op still posted */
    reg.attached(0);
    announce(0, 7);
    expect_deregister(reg.release_requested(0, 7, false, false), 0, 7);
}

} // namespace

/* ---- intents: MRs registered and never announced ---------------------- */

namespace {

/* Client `index` says it is about to register mr(handle)'s region. */
void intend(mr_registry &reg, uint32_t index, uint32_t handle)
{
    const client_mr m = mr(handle);
    EXPECT_TRUE(reg.intended(index, m.addr, m.length).empty());
}

/* Client 0 dies at t0 with nothing posted; its record is due at
 * t0 + grace. */
mr_actions die_and_wait(mr_registry &reg)
{
    reg.client_gone(0, 1, 0);
    EXPECT_TRUE(reg.tick(t0).empty());
    return reg.tick(t0 + grace);
}

} // namespace

TEST_F(mr_registry_test, a_dead_clients_unannounced_mr_is_found_and_freed)
{
    announce(0, 5);
    intend(reg, 0, 9); /* registered as handle 9, never announced */
    EXPECT_EQ(reg.intents_pending(), 1u);
    auto acts = die_and_wait(reg);
    ASSERT_EQ(acts.size(), 1u) << "its known MR waits for the look";
    EXPECT_EQ(acts[0].kind, mr_action_kind::find_unannounced);

    /* the device knows handles 5 (announced), 9, and 12 (nobody's
     * intent: not the dead client's) */
    const std::vector<client_mr> found{mr(5), mr(9), mr(12)};
    acts        = reg.unannounced(found);
    auto deregs = only(acts, mr_action_kind::deregister);
    ASSERT_EQ(deregs.size(), 2u);
    EXPECT_TRUE(is(deregs[0], mr_action_kind::deregister, 5));
    EXPECT_TRUE(is(deregs[1], mr_action_kind::deregister, 9));
    auto notes = only(acts, mr_action_kind::note);
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_NE(notes[0].text.find("registered MR handle 9 (4096 bytes at "
                                 "0x900000) and died before announcing it"),
              std::string::npos)
            << notes[0].text;
    EXPECT_EQ(reg.counters().unannounced, 1u);
    EXPECT_TRUE(reg.deregistered(5, 5u).empty());
    acts = reg.deregistered(9, 9u);
    ASSERT_EQ(acts.size(), 1u);
    EXPECT_NE(acts[0].text.find("deregistered 2 of its 2 MRs"),
              std::string::npos)
            << acts[0].text;
    EXPECT_EQ(reg.counters().cleaned, 2u);
    EXPECT_TRUE(reg.idle());
    EXPECT_EQ(reg.intents_pending(), 0u);
}

TEST_F(mr_registry_test, the_look_comes_alone_and_before_any_deregister)
{
    announce(1, 7); /* client 1 dies with an MR and no intent */
    reg.client_gone(1, 1, 0);
    intend(reg, 0, 9); /* client 0 dies with an intent */
    auto acts = die_and_wait(reg);
    ASSERT_EQ(acts.size(), 1u) << "client 1's MR goes after the look";
    EXPECT_EQ(acts[0].kind, mr_action_kind::find_unannounced);
    /* the caller looks (the device still has 7, known: skipped), and the
     * due records are collected then */
    acts        = reg.unannounced(std::vector<client_mr>{mr(7)});
    auto deregs = only(acts, mr_action_kind::deregister);
    ASSERT_EQ(deregs.size(), 1u);
    EXPECT_TRUE(is(deregs[0], mr_action_kind::deregister, 7));
    EXPECT_EQ(deregs[0].index, 1u);
}

TEST_F(mr_registry_test, an_announce_or_a_withdrawal_takes_the_intent_back)
{
    intend(reg, 0, 5);
    intend(reg, 0, 6);
    EXPECT_TRUE(reg.announced(0, mr(5), on_device(5)).empty());
    reg.withdrawn(0, mr(6).addr, mr(6).length);
    EXPECT_EQ(reg.intents_pending(), 0u);
    auto acts = die_and_wait(reg);
    EXPECT_TRUE(only(acts, mr_action_kind::find_unannounced).empty())
            << "nothing to look for";
    EXPECT_EQ(only(acts, mr_action_kind::deregister).size(), 1u);
}

TEST_F(mr_registry_test, an_unannounced_mr_a_live_client_may_own_stays)
{
    /* both mean to register the same region (same address, as two
     * processes of one program may): the MR found may be client 1's, on
     * its way to being announced */
    intend(reg, 0, 9);
    intend(reg, 1, 9);
    auto acts = die_and_wait(reg);
    ASSERT_EQ(only(acts, mr_action_kind::find_unannounced).size(), 1u);
    const std::vector<client_mr> found{mr(9)};
    acts = reg.unannounced(found);
    EXPECT_TRUE(only(acts, mr_action_kind::deregister).empty())
            << "a live client's MR was deregistered";
    auto notes = only(acts, mr_action_kind::note);
    ASSERT_GE(notes.size(), 1u);
    EXPECT_NE(notes[0].text.find("more than one client"), std::string::npos)
            << notes[0].text;
    EXPECT_EQ(reg.counters().unannounced, 0u);
    EXPECT_EQ(reg.gone_waiting(), 0u) << "the record ends all the same";
    EXPECT_EQ(reg.intents_pending(), 1u) << "client 1's is kept";
}

TEST_F(mr_registry_test, an_mr_announced_while_looking_is_not_taken)
{
    /* the look found handle 9 unknown; the announce arrived before the
     * answer (the engine reads every socket after looking) */
    intend(reg, 0, 9);
    auto n = mr(9);
    reg.client_gone(0, 1, 0);
    intend(reg, 1, 9);
    EXPECT_TRUE(reg.tick(t0).empty());
    auto acts = reg.tick(t0 + grace);
    ASSERT_EQ(only(acts, mr_action_kind::find_unannounced).size(), 1u);
    EXPECT_TRUE(reg.announced(1, n, on_device(9)).empty());
    acts = reg.unannounced(std::vector<client_mr>{n});
    EXPECT_TRUE(only(acts, mr_action_kind::deregister).empty());
    EXPECT_EQ(reg.mrs_of(1).count(n.lkey), 1u) << "client 1's MR stays its";
}

TEST_F(mr_registry_test, more_unannounced_mrs_than_intents_are_left_alone)
{
    intend(reg, 0, 9);
    die_and_wait(reg);
    client_mr twin = mr(9);
    twin.handle    = 10;
    auto acts      = reg.unannounced(std::vector<client_mr>{mr(9), twin});
    EXPECT_TRUE(only(acts, mr_action_kind::deregister).empty());
    EXPECT_EQ(reg.gone_waiting(), 0u);
}

TEST_F(mr_registry_test, intents_are_bounded_and_a_siblings_ignored)
{
    for (size_t i = 0; i < mr_registry::max_intents; ++i) {
        intend(reg, 0, static_cast<uint32_t>(i + 1));
    }
    auto acts = reg.intended(0, 0x1234000, 4096);
    ASSERT_EQ(acts.size(), 1u);
    EXPECT_NE(acts[0].text.find("ignored"), std::string::npos) << acts[0].text;
    EXPECT_EQ(reg.intents_pending(), mr_registry::max_intents);

    reg.attached(2);
    reg.joined(2, 1);
    acts = reg.intended(2, 0x1234000, 4096);
    ASSERT_EQ(acts.size(), 1u);
    EXPECT_NE(acts[0].text.find("sibling"), std::string::npos) << acts[0].text;
}

TEST_F(mr_registry_test, the_executor_answers_a_look_with_what_it_finds)
{
    intend(reg, 0, 9);
    std::vector<std::string> seen;
    const mr_driver exec{[&](uint32_t handle) -> result<uint32_t> {
                             seen.push_back("dereg " + std::to_string(handle));
                             return handle;
                         },
                         [&](uint32_t, uint32_t, const std::string &) {},
                         [&](std::string_view) {},
                         [&] {
                             seen.emplace_back("find");
                             return std::vector<client_mr>{mr(9)};
                         },
                         {}};
    exec.run(reg, die_and_wait(reg));
    const std::vector<std::string> want{"find", "dereg 9"};
    EXPECT_EQ(seen, want);
    EXPECT_TRUE(reg.idle());
}
