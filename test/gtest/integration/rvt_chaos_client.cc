/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One client process of the chaos run (test/testbed/chaos_guest.py), where
 * peers are killed and restarted, links go down and processes are stopped
 * at random. It attaches to its node's rvtd through the client library,
 * publishes its card, and sends rounds to every other client until
 * DIR/stop exists (the driver's word, looked for every second) or at the
 * latest until EPOCH (Unix seconds), tolerating all of that, and verifies
 * everything that arrives (chaos_runner.h says how).
 *
 *   rvt_chaos_client --dir=DIR --id=ID --clients=N --until=EPOCH
 *       [--incarnation=INC] [--size=BYTES] [--window=S]
 *
 * The process started as ID's replacement has a higher INC (the driver
 * counts); it publishes DIR/card.ID.INC. Exit 0 and a "CHAOS ..." summary
 * line when nothing was corrupt, lost, duplicated or left without a
 * completion; else 1.
 */
#include "chaos_runner.h"
#include "traffic_common.h"

using namespace rvt::test;

namespace {

chaos::options parse(int argc, char **argv)
{
    chaos::options o;
    traffic::parse_options(
            argc, argv, o, [&](std::string_view name, std::string_view val) {
                if (name == "--until") {
                    o.until = traffic::parse_u32(val, "until");
                } else if (name == "--incarnation") {
                    o.incarnation = traffic::parse_u32(val, "incarnation");
                } else if (name == "--window") {
                    o.window = traffic::parse_u32(val, "window");
                } else {
                    return false;
                }
                return true;
            });
    /* each write's length names its slot and its sender's incarnation's
     * parity (64 bytes less a step), and the shortest still holds the
     * slot's header */
    if (o.until == 0 || o.window < 1 || o.window > 64 ||
        o.size < 64 * (2 * o.window + 1)) {
        traffic::die("rvt_chaos_client needs --until=EPOCH, 1 <= --window "
                     "<= 64 and --size >= 64 x (2 x window + 1)");
    }
    return o;
}

} // namespace

int main(int argc, char **argv)
{
    const chaos::options o = parse(argc, argv);
    auto session           = traffic::open_session();
    return chaos::runner(o, *session).run();
}
