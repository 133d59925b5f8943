/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which RDMA devices and ports this host has, read from sysfs alone (no
 * verbs call, no device opened): what the UCX module lists as memory
 * domains and transport devices before any agent is involved.
 *
 *   <root>/<device>/ports/<n>/state       "4: ACTIVE"
 *   <root>/<device>/ports/<n>/link_layer  "InfiniBand" or "Ethernet"
 *   <root>/<device>/ports/<n>/rate        "100 Gb/sec (4X EDR)"
 *
 * root is /sys/class/infiniband; tests pass a directory of their own. A
 * file that is missing or unreadable leaves its field empty (or zero): the
 * caller decides what an unknown means. Device names that could not name
 * an agent (runtime_dir.h: [A-Za-z0-9_.-], 1..63) are skipped.
 */
#ifndef RVT_CLIENT_DEVICES_H
#define RVT_CLIENT_DEVICES_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rvt::client {

inline constexpr const char *sysfs_infiniband = "/sys/class/infiniband";

/* Where list_ports and first_active_port look when not told: sysfs, or
 * the directory set_devices_root named (empty: sysfs again). That is for
 * a host test that runs its agent on a device of its own in the same
 * process (test/gtest/uct/), so that the module lists that device. */
std::string devices_root();
void set_devices_root(std::string root);

struct port_info {
    std::string device; /* e.g. "rxe1" */
    int port; /* 1.. */
    int state; /* the number before the colon: 4 is ACTIVE, 0 unknown */
    std::string state_name; /* "ACTIVE", "DOWN", ... or empty */
    std::string link_layer; /* "InfiniBand", "Ethernet", or empty */
    double rate_gbps; /* signalling rate of the link, 0 when unknown */
    std::string speed; /* the rate's lane speed: "EDR", "QDR", ... or empty */

    bool active() const
    {
        return state == 4;
    }
};

/* Every port of every device under root, sorted by device name, then
 * port number. */
std::vector<port_info> list_ports(const std::string &root = devices_root());

/* The lowest-numbered ACTIVE port of `device`, if it has one. */
std::optional<port_info>
first_active_port(std::string_view device,
                  const std::string &root = devices_root());

/* "4: ACTIVE" -> {4, "ACTIVE"}; nullopt when it does not parse. */
std::optional<std::pair<int, std::string>> parse_port_state(std::string_view);

/* "100 Gb/sec (4X EDR)" -> 100; "2.5 Gb/sec (1X SDR)" -> 2.5; nullopt
 * when it does not parse. */
std::optional<double> parse_port_rate(std::string_view text);

/* "100 Gb/sec (4X EDR)" -> "EDR"; empty when the rate names no speed. */
std::string parse_port_speed(std::string_view text);

/* The one-way latency UCX's own InfiniBand transports (rc_verbs, ud_verbs)
 * assume for a port, in seconds: their table by lane speed (SDR 5 us, DDR
 * 2.5 us, QDR 1.3 us, FDR10 and FDR 0.7 us, EDR and faster 0.6 us, an
 * unknown speed as SDR) plus 0.2 us on RoCE. rvt starts from the same
 * figure so that UCP compares it with rc_verbs on the same footing. */
double device_latency(const port_info &port);

/* The port's data rate in bytes per second: the sysfs rate, less the
 * 8b/10b encoding of SDR, DDR and InfiniBand QDR (the faster speeds' rate
 * is already their data rate), as UCX's table has it; 10 Gb/s when the
 * rate is unknown. */
double device_data_rate(const port_info &port);

/* What RDMA writes of path_mtu-byte packets carry per second on the port,
 * in bytes: the data rate less each packet's headers (BTH, RETH, the CRCs
 * and delimiter, and LRH on InfiniBand or GRH and Ethernet on RoCE), the
 * figure rc_verbs reports for the same port and MTU. */
double rc_write_bandwidth(const port_info &port, uint32_t path_mtu);

/* What one large RDMA READ or WRITE carries per second: its packets after
 * the first have no RETH (BTH, the CRCs and delimiter, and the link's
 * headers only), where UCX's rc figure and every UD send pay a transport
 * header in each packet. */
double rdma_stream_bandwidth(const port_info &port, uint32_t path_mtu);

} // namespace rvt::client

#endif
