/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The clients' MRs (see mr_registry.h for the states and the table).
 */
#include "uct/ib/rvt/agent/engine/mr_registry.h"

#include <algorithm>
#include <cstdio>

namespace rvt::agent {

namespace {

std::string client_text(uint32_t index)
{
    return "client index " + std::to_string(index);
}

std::string handle_text(uint32_t handle)
{
    return "MR handle " + std::to_string(handle);
}

std::string hex_text(uint64_t value)
{
    char hex[19];
    std::snprintf(hex, sizeof(hex), "0x%llx",
                  static_cast<unsigned long long>(value));
    return hex;
}

std::string region_text(uint64_t addr, uint64_t length)
{
    return std::to_string(length) + " bytes at " + hex_text(addr);
}

/* Takes one element equal to `x` out of `v`; false if there is none. */
template<class T> bool take_one(std::vector<T> &v, const T &x)
{
    auto it = std::find(v.begin(), v.end(), x);
    if (it == v.end()) {
        return false;
    }
    v.erase(it);
    return true;
}

} // namespace

mr_registry::mr_registry(uint32_t max_clients,
                         std::chrono::milliseconds grace) :
    m_grace(grace), m_clients(max_clients)
{
}

mr_action mr_registry::note(mr_note about, std::string text)
{
    return {mr_action_kind::note, 0, 0, std::move(text), about};
}

void mr_registry::attached(uint32_t index)
{
    const uint64_t epoch   = m_clients[index].epoch + 1;
    m_clients[index]       = client{};
    m_clients[index].epoch = epoch;
}

void mr_registry::joined(uint32_t sibling, uint32_t leader)
{
    m_clients[sibling].leader = leader;
    m_clients[leader].siblings.push_back(sibling);
}

bool mr_registry::gone_siblings_posting(uint32_t index, uint64_t epoch) const
{
    return std::any_of(m_gone.begin(), m_gone.end(), [&](const auto &g) {
        return g.leader && g.leader->index == index &&
               g.leader->epoch == epoch && g.posted > 0;
    });
}

bool mr_registry::group_busy(uint32_t index, uint32_t lkey,
                             const client_set &busy_rings) const
{
    const client &c = m_clients[index];
    if (busy_rings.contains(index) || c.uses.in_use(lkey)) {
        return true;
    }
    for (uint32_t s : c.siblings) {
        if (busy_rings.contains(s) || m_clients[s].uses.in_use(lkey)) {
            return true;
        }
    }
    return gone_siblings_posting(index, c.epoch);
}

std::string mr_registry::announce_error(uint32_t index, const client_mr &mr,
                                        const device_mr &device) const
{
    const client &c = m_clients[index];
    if (c.leader) {
        return "this client is a sibling of index " +
               std::to_string(*c.leader) + ", which announces its MRs";
    }
    if (auto known = m_handles.find(mr.handle); known != m_handles.end()) {
        return known->second.index == index ?
                       std::string("this client holds it already") :
                       client_text(known->second.index) + " holds it";
    }
    switch (device.who) {
    case device_mr::owner::agent:
        return "it is one of the agent's own MRs";
    case device_mr::owner::nobody:
        return "no MR in the agent's PD has that handle";
    case device_mr::owner::client:
        break;
    }
    std::string differ;
    const auto compare = [&](const char *what, uint64_t announced,
                             uint64_t actual, bool hex) {
        if (announced == actual) {
            return;
        }
        const auto text = [hex](uint64_t v) {
            return hex ? hex_text(v) : std::to_string(v);
        };
        differ += (differ.empty() ? "" : "; ") + std::string(what) + " " +
                  text(announced) + " announced, the device's is " +
                  text(actual);
    };
    compare("lkey", mr.lkey, device.mr.lkey, true);
    compare("rkey", mr.rkey, device.mr.rkey, true);
    compare("address", mr.addr, device.mr.addr, true);
    compare("length", mr.length, device.mr.length, false);
    if (!differ.empty()) {
        return differ;
    }
    if (std::find(c.intents.begin(), c.intents.end(),
                  intent{mr.addr, mr.length}) == c.intents.end()) {
        return "this client never said it would register " +
               region_text(mr.addr, mr.length) + " (no mr_intent)";
    }
    return {};
}

mr_actions mr_registry::announced(uint32_t index, const client_mr &mr,
                                  const device_mr &device, bool answer)
{
    mr_actions out;
    if (std::string why = announce_error(index, mr, device); !why.empty()) {
        out.push_back(
                note(mr_note::announcement, client_text(index) + " announced " +
                                                    handle_text(mr.handle) +
                                                    ": " + why + ": refused"));
        if (answer) {
            out.push_back({mr_action_kind::answer_announce, index, mr.handle,
                           std::move(why)});
        }
        return out;
    }
    take_one(m_clients[index].intents, intent{mr.addr, mr.length});
    m_handles.emplace(mr.handle, record{index, mr, state::live});
    m_clients[index].mrs[mr.lkey] = mr;
    m_highest_handle              = std::max(m_highest_handle, mr.handle);
    if (answer) {
        out.push_back({mr_action_kind::answer_announce, index, mr.handle, {}});
    }
    return out;
}

mr_actions mr_registry::intended(uint32_t index, uint64_t addr, uint64_t length)
{
    client &c = m_clients[index];
    if (c.leader) {
        return {note(mr_note::intent, client_text(index) +
                                              " is about to register " +
                                              region_text(addr, length) +
                                              ", but it is a sibling of "
                                              "index " +
                                              std::to_string(*c.leader) +
                                              ", which registers: ignored")};
    }
    if (c.intents.size() >= max_intents) {
        return {note(
                mr_note::intent,
                client_text(index) + " is about to register " +
                        region_text(addr, length) + " with " +
                        std::to_string(max_intents) +
                        " registrations not announced yet: ignored (if it "
                        "dies before announcing it, the MR stays registered)")};
    }
    c.intents.push_back({addr, length});
    return {};
}

void mr_registry::withdrawn(uint32_t index, uint64_t addr, uint64_t length)
{
    take_one(m_clients[index].intents, intent{addr, length});
}

size_t mr_registry::intents_pending() const
{
    size_t n = 0;
    for (const auto &c : m_clients) {
        n += c.intents.size();
    }
    for (const auto &g : m_gone) {
        n += g.intents.size();
    }
    return n;
}

mr_actions mr_registry::release_requested(uint32_t index, uint32_t handle,
                                          bool answer, bool ring_busy)
{
    mr_actions out;
    auto it = m_handles.find(handle);
    if (it == m_handles.end() || it->second.index != index ||
        it->second.st == state::orphaned) {
        refuse(index, handle, answer,
               handle_text(handle) +
                       " is not this client's: nothing deregistered",
               out);
        return out;
    }
    record &r = it->second;
    if (r.st != state::live) {
        refuse(index, handle, answer,
               handle_text(handle) + " is being released already", out);
        return out;
    }
    r.answer = answer;
    /* the client posts before it releases: work still in its ring may
     * name the MR; deregistering under a queued or posted op would fail
     * it with a local protection error and break the shared QP */
    const client &c = m_clients[index];
    if (ring_busy || c.uses.in_use(r.mr.lkey) || !c.siblings.empty() ||
        gone_siblings_posting(index, c.epoch)) {
        /* with siblings, releases_due looks at their rings and ops */
        r.st = state::deferred;
        m_deferred.push_back(handle);
        ++m_counters.deferred;
        return out;
    }
    start_deregister(handle, r, out);
    return out;
}

mr_actions mr_registry::on_notice(uint32_t index, const wire::mr_notice &notice,
                                  bool ring_busy, const device_mr &device)
{
    switch (static_cast<wire::msg_type>(notice.hdr.type)) {
    case wire::msg_type::mr_registered:
        return announced(index,
                         {notice.handle, notice.lkey, notice.rkey, notice.addr,
                          notice.length},
                         device,
                         notice.flags & wire::mr_registered_reply_wanted);
    case wire::msg_type::mr_intent:
        if (notice.flags & wire::mr_intent_withdrawn) {
            withdrawn(index, notice.addr, notice.length);
            return {};
        }
        return intended(index, notice.addr, notice.length);
    default:
        break;
    }
    return release_requested(index, notice.handle,
                             notice.flags & wire::mr_release_reply_wanted,
                             ring_busy);
}

void mr_registry::refuse(uint32_t index, uint32_t handle, bool answer,
                         std::string reason, mr_actions &out)
{
    out.push_back(note(mr_note::release, client_text(index) + " released " +
                                                 handle_text(handle) + ": " +
                                                 reason));
    if (answer) {
        out.push_back({mr_action_kind::answer_release, index, handle,
                       std::move(reason)});
    }
}

void mr_registry::start_deregister(uint32_t handle, record &r, mr_actions &out)
{
    r.st = state::deregistering;
    out.push_back({mr_action_kind::deregister, r.index, handle, {}});
}

client_set mr_registry::rings_asked() const
{
    client_set asked;
    for (uint32_t handle : m_deferred) {
        const uint32_t index = m_handles.at(handle).index;
        asked.insert(index);
        for (uint32_t s : m_clients[index].siblings) {
            asked.insert(s);
        }
    }
    return asked;
}

mr_actions mr_registry::releases_due(const client_set &busy_rings)
{
    mr_actions out;
    std::erase_if(m_deferred, [&](uint32_t handle) {
        record &r = m_handles.at(handle);
        if (group_busy(r.index, r.mr.lkey, busy_rings)) {
            return false;
        }
        start_deregister(handle, r, out);
        return true;
    });
    return out;
}

void mr_registry::client_gone(uint32_t index, uint32_t generation,
                              uint32_t posted)
{
    client &c = m_clients[index];
    gone_client g{};
    g.index      = index;
    g.generation = generation;
    g.posted     = posted;
    g.epoch      = c.epoch;
    if (c.leader) {
        g.leader = leader_of_gone{*c.leader, m_clients[*c.leader].epoch};
        std::erase(m_clients[*c.leader].siblings, index);
    }
    for (auto &[handle, r] : m_handles) {
        if (r.index != index || r.gone) {
            continue;
        }
        if (r.st == state::deregistering) {
            r.answer = false; /* nobody left to answer */
            continue;
        }
        r.st         = state::orphaned;
        r.gone       = true;
        r.generation = generation;
        g.handles.push_back(handle);
    }
    std::sort(g.handles.begin(), g.handles.end());
    std::erase_if(m_deferred, [&](uint32_t handle) {
        return m_handles.at(handle).st == state::orphaned;
    });
    m_clients[index].mrs.clear(); /* its lkey uses: until attached() */
    g.intents = std::move(m_clients[index].intents);
    m_clients[index].intents.clear();
    m_gone.push_back(std::move(g));
}

void mr_registry::gone_op_retired(uint32_t index, uint32_t generation)
{
    for (auto &g : m_gone) {
        if (g.index == index && g.generation == generation && g.posted > 0) {
            --g.posted;
            return;
        }
    }
}

mr_actions mr_registry::tick(time_point now)
{
    mr_actions out;
    for (auto &g : m_gone) {
        /* a leader's MRs wait for its group: siblings still attached (the
         * attach server ends them with it), and gone ones' posted ops */
        const client &now_at  = m_clients[g.index];
        const bool group_done = g.leader ||
                                ((now_at.epoch != g.epoch ||
                                  now_at.siblings.empty()) &&
                                 !gone_siblings_posting(g.index, g.epoch));
        if (!g.release_at && g.posted == 0 && group_done) {
            g.release_at = now + m_grace;
        }
    }
    bool sweep = false;
    for (auto &g : m_gone) {
        if (g.release_at && now >= *g.release_at) {
            g.due = true;
            sweep = sweep || !g.intents.empty();
        }
    }
    if (sweep && !m_sweep_asked) {
        /* alone: the due records are collected after the look
         * (unannounced), so that nothing is deregistered before it */
        m_sweep_asked = true;
        out.push_back({mr_action_kind::find_unannounced, 0, 0, {}});
        return out;
    }
    collect_due(out);
    return out;
}

void mr_registry::collect_due(mr_actions &out)
{
    /* a record whose MRs are out for deregistering stays until the last
     * outcome (finish_gone); one with none goes now */
    std::erase_if(m_gone, [&](gone_client &g) {
        if (!g.due || !g.intents.empty()) {
            return false;
        }
        if (g.handles.empty()) {
            out.push_back(
                    note(mr_note::departure,
                         client_text(g.index) +
                                 " is gone: deregistered 0 of its 0 MRs"));
            return true;
        }
        for (uint32_t handle : g.handles) {
            record &r = m_handles.at(handle);
            if (r.st == state::orphaned) {
                start_deregister(handle, r, out);
                ++g.left;
            }
        }
        return false;
    });
}

mr_actions mr_registry::unannounced(std::span<const client_mr> found)
{
    mr_actions out;
    m_sweep_asked = false;
    std::vector<client_mr> unknown;
    for (const auto &mr : found) {
        if (!knows(mr.handle)) {
            unknown.push_back(mr);
        }
    }
    /* one key at a time: every unknown MR with that (addr, length) */
    std::sort(unknown.begin(), unknown.end(), [](const auto &a, const auto &b) {
        return std::tie(a.addr, a.length, a.handle) <
               std::tie(b.addr, b.length, b.handle);
    });
    for (size_t i = 0; i < unknown.size();) {
        const intent key{unknown[i].addr, unknown[i].length};
        size_t j = i;
        while (j < unknown.size() && unknown[j].addr == key.addr &&
               unknown[j].length == key.length) {
            ++j;
        }
        adopt(std::span(unknown).subspan(i, j - i), key, out);
        i = j;
    }
    for (auto &g : m_gone) {
        if (g.due) {
            g.intents.clear(); /* registered nothing else, or too late */
        }
    }
    collect_due(out);
    return out;
}

void mr_registry::adopt(std::span<const client_mr> found, const intent &key,
                        mr_actions &out)
{
    const auto count = [&](const std::vector<intent> &v) {
        return static_cast<size_t>(std::count(v.begin(), v.end(), key));
    };
    size_t live = 0;
    for (const auto &c : m_clients) {
        live += count(c.intents);
    }
    gone_client *owner = nullptr;
    size_t owners      = 0;
    for (auto &g : m_gone) {
        if (count(g.intents) > 0) {
            owner = &g;
            ++owners;
        }
    }
    if (owners == 0) {
        return; /* an MR registered without an intent: not a dead one's */
    }
    const std::string what = std::to_string(found.size()) +
                             " unannounced MR(s) of " +
                             region_text(key.addr, key.length);
    if (live > 0 || owners > 1 || found.size() > count(owner->intents)) {
        out.push_back(note(mr_note::departure,
                           what + ": more than one client (live or gone) "
                                  "meant to register that: left registered"));
        return;
    }
    if (!owner->due) {
        return; /* its own sweep comes when its ops are done */
    }
    for (const auto &mr : found) {
        record r{owner->index, mr, state::orphaned};
        r.gone       = true;
        r.generation = owner->generation;
        m_handles.emplace(mr.handle, r);
        owner->handles.push_back(mr.handle);
        take_one(owner->intents, key);
        ++m_counters.unannounced;
        out.push_back(
                note(mr_note::departure,
                     client_text(owner->index) + " registered " +
                             handle_text(mr.handle) + " (" +
                             region_text(key.addr, key.length) +
                             ") and died before announcing it: it goes with "
                             "the client's other MRs"));
    }
}

mr_actions
mr_registry::deregistered(uint32_t handle, const result<uint32_t> &outcome)
{
    mr_actions out;
    auto it = m_handles.find(handle);
    if (it == m_handles.end() || it->second.st != state::deregistering) {
        return out;
    }
    const record r = it->second;
    /* forgotten even if the device refused: the client is done with it,
     * and a handle the kernel still holds cannot be reused */
    forget(handle, r);
    if (!outcome) {
        ++m_counters.leaked;
        out.push_back(note(mr_note::device,
                           client_text(r.index) + ": " + outcome.error()));
    }
    if (r.gone) {
        finish_gone(r, outcome, out);
        return out;
    }
    if (outcome) {
        ++m_counters.released;
    }
    if (r.answer) {
        out.push_back({mr_action_kind::answer_release, r.index, handle,
                       outcome ? std::string() : outcome.error()});
    }
    return out;
}

void mr_registry::forget(uint32_t handle, const record &r)
{
    m_handles.erase(handle);
    if (!r.gone) {
        client &c = m_clients[r.index];
        c.mrs.erase(r.mr.lkey);
        c.uses.forget(r.mr.lkey);
    }
}

void mr_registry::finish_gone(const record &r, const result<uint32_t> &outcome,
                              mr_actions &out)
{
    auto g = std::find_if(m_gone.begin(), m_gone.end(), [&](const auto &x) {
        return x.index == r.index && x.generation == r.generation;
    });
    if (g == m_gone.end()) {
        return;
    }
    if (outcome) {
        ++m_counters.cleaned;
        ++g->freed;
    }
    if (--g->left > 0) {
        return;
    }
    out.push_back(note(mr_note::departure,
                       client_text(g->index) + " is gone: deregistered " +
                               std::to_string(g->freed) + " of its " +
                               std::to_string(g->handles.size()) + " MRs"));
    m_gone.erase(g);
}

std::optional<mr_registry::time_point> mr_registry::next_timer() const
{
    std::optional<time_point> t;
    for (const auto &g : m_gone) {
        if (g.release_at && g.left == 0 && (!t || *g.release_at < *t)) {
            t = g.release_at;
        }
    }
    return t;
}

} // namespace rvt::agent
