/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the sysfs device listing (client/devices.h) on a fake
 * /sys/class/infiniband: port state and rate parsing, ACTIVE ports only
 * where asked, ports in numeric order, the lane speed and the latency and
 * bandwidth UCX's ib transports derive from it, unreadable attributes
 * left unknown, and names that could not name an agent skipped.
 */
#include "uct/ib/rvt/agent/device/device.h"
#include "uct/ib/rvt/client/devices.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

using namespace rvt::client;
namespace fs = std::filesystem;

namespace {

class devices_fixture : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/rvt-devices-test.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        m_root = tmpl;
    }

    void TearDown() override
    {
        fs::remove_all(m_root);
    }

    void port(const std::string &dev, int n, const std::string &state,
              const std::string &rate       = "100 Gb/sec (4X EDR)",
              const std::string &link_layer = "InfiniBand")
    {
        fs::path dir = fs::path(m_root) / dev / "ports" / std::to_string(n);
        fs::create_directories(dir);
        write(dir / "state", state + "\n");
        write(dir / "rate", rate + "\n");
        write(dir / "link_layer", link_layer + "\n");
    }

    static void write(const fs::path &path, const std::string &text)
    {
        std::ofstream(path) << text;
    }

    std::string m_root;
};

} // namespace

TEST(devices, parses_port_state)
{
    auto st = parse_port_state("4: ACTIVE");
    ASSERT_TRUE(st.has_value());
    EXPECT_EQ(st->first, 4);
    EXPECT_EQ(st->second, "ACTIVE");
    st = parse_port_state("1: DOWN");
    ASSERT_TRUE(st.has_value());
    EXPECT_EQ(st->first, 1);
    EXPECT_EQ(st->second, "DOWN");
    EXPECT_FALSE(parse_port_state("").has_value());
    EXPECT_FALSE(parse_port_state("ACTIVE").has_value());
    EXPECT_FALSE(parse_port_state(": ACTIVE").has_value());
    EXPECT_FALSE(parse_port_state("x4: ACTIVE").has_value());
}

TEST(devices, parses_port_rate)
{
    EXPECT_DOUBLE_EQ(parse_port_rate("100 Gb/sec (4X EDR)").value(), 100.0);
    EXPECT_DOUBLE_EQ(parse_port_rate("2.5 Gb/sec (1X SDR)").value(), 2.5);
    EXPECT_DOUBLE_EQ(parse_port_rate("10 Gb/sec").value(), 10.0);
    EXPECT_FALSE(parse_port_rate("").has_value());
    EXPECT_FALSE(parse_port_rate("fast").has_value());
    EXPECT_FALSE(parse_port_rate("10 Mb/sec").has_value());
    EXPECT_FALSE(parse_port_rate("0 Gb/sec").has_value());
}

TEST(devices, parses_port_speed)
{
    EXPECT_EQ(parse_port_speed("100 Gb/sec (4X EDR)"), "EDR");
    EXPECT_EQ(parse_port_speed("40 Gb/sec (4X FDR10)"), "FDR10");
    EXPECT_EQ(parse_port_speed("2.5 Gb/sec (1X SDR)"), "SDR");
    EXPECT_EQ(parse_port_speed("10 Gb/sec"), "");
    EXPECT_EQ(parse_port_speed("(X)"), "");
    EXPECT_EQ(parse_port_speed(""), "");
}

/* rvt's latency starts from the figure rc_verbs reports for the same port
 * (uct_ib_iface_query's table), so UCP weighs the two on one footing */
TEST(devices, latency_is_ucx_ib_table_by_lane_speed)
{
    port_info p{"mlx5_0", 1, 4, "ACTIVE", "InfiniBand", 100, "EDR"};
    EXPECT_DOUBLE_EQ(device_latency(p), 600e-9);
    p.speed = "FDR";
    EXPECT_DOUBLE_EQ(device_latency(p), 700e-9);
    p.speed = "QDR";
    EXPECT_DOUBLE_EQ(device_latency(p), 1300e-9);
    p.speed      = "HDR";
    p.link_layer = "Ethernet";
    EXPECT_DOUBLE_EQ(device_latency(p), 800e-9);
    p.speed = ""; /* unknown: SDR, as UCX falls back */
    EXPECT_DOUBLE_EQ(device_latency(p), 5200e-9);
}

TEST(devices, data_rate_drops_8b10b_encoding_where_it_applies)
{
    port_info p{"mlx5_0", 1, 4, "ACTIVE", "InfiniBand", 40, "QDR"};
    EXPECT_DOUBLE_EQ(device_data_rate(p), 4e9);
    p.link_layer = "Ethernet"; /* 10/40 GbE: 64/66, already in the rate */
    EXPECT_DOUBLE_EQ(device_data_rate(p), 5e9);
    p.rate_gbps = 100;
    p.speed     = "EDR";
    EXPECT_DOUBLE_EQ(device_data_rate(p), 12.5e9);
    p.rate_gbps = 0; /* unknown: 10 Gb/s */
    EXPECT_DOUBLE_EQ(device_data_rate(p), 1.25e9);
}

/* the figure uct_ib_iface_query gives rc_verbs (wire speed, MTU, headers) */
TEST(devices, rc_write_bandwidth_is_rc_verbs_figure)
{
    port_info p{"mlx5_0", 1, 4, "ACTIVE", "InfiniBand", 100, "EDR"};
    EXPECT_DOUBLE_EQ(rc_write_bandwidth(p, 4096), 12.5e9 * 4096 / (4096 + 44));
    p.link_layer = "Ethernet";
    EXPECT_DOUBLE_EQ(rc_write_bandwidth(p, 1024), 12.5e9 * 1024 / (1024 + 90));
}

/* a large RDMA operation's packets after the first carry no RETH */
TEST(devices, rdma_stream_bandwidth_has_no_transport_header)
{
    port_info p{"mlx5_0", 1, 4, "ACTIVE", "InfiniBand", 100, "EDR"};
    EXPECT_DOUBLE_EQ(rdma_stream_bandwidth(p, 4096),
                     12.5e9 * 4096 / (4096 + 28));
    p.link_layer = "Ethernet";
    EXPECT_DOUBLE_EQ(rdma_stream_bandwidth(p, 1024),
                     12.5e9 * 1024 / (1024 + 74));
    EXPECT_GT(rdma_stream_bandwidth(p, 1024), rc_write_bandwidth(p, 1024));
}

TEST_F(devices_fixture, lists_every_port_in_order)
{
    port("mlx5_0", 2, "1: DOWN");
    port("mlx5_0", 1, "4: ACTIVE");
    port("mlx5_0", 10, "4: ACTIVE");
    port("rxe0", 1, "4: ACTIVE", "10 Gb/sec (1X QDR)", "Ethernet");

    auto ports = list_ports(m_root);
    ASSERT_EQ(ports.size(), 4u);
    EXPECT_EQ(ports[0].device, "mlx5_0");
    EXPECT_EQ(ports[0].port, 1);
    EXPECT_EQ(ports[1].port, 2);
    EXPECT_EQ(ports[2].port, 10);
    EXPECT_TRUE(ports[0].active());
    EXPECT_FALSE(ports[1].active());
    EXPECT_EQ(ports[1].state_name, "DOWN");
    EXPECT_DOUBLE_EQ(ports[0].rate_gbps, 100.0);
    EXPECT_EQ(ports[0].link_layer, "InfiniBand");

    EXPECT_EQ(ports[3].device, "rxe0");
    EXPECT_EQ(ports[3].link_layer, "Ethernet");
    EXPECT_DOUBLE_EQ(ports[3].rate_gbps, 10.0);
    EXPECT_EQ(ports[3].speed, "QDR");
}

TEST_F(devices_fixture, first_active_port_skips_ports_that_are_down)
{
    port("rxe1", 1, "1: DOWN");
    port("rxe1", 2, "4: ACTIVE");
    port("rxe2", 1, "2: INIT");

    auto p = first_active_port("rxe1", m_root);
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->device, "rxe1");
    EXPECT_EQ(p->port, 2);
    EXPECT_FALSE(first_active_port("rxe2", m_root).has_value());
    EXPECT_FALSE(first_active_port("nosuch", m_root).has_value());
    EXPECT_FALSE(first_active_port("../rxe1", m_root).has_value());
}

TEST_F(devices_fixture, unknowns_stay_unknown)
{
    fs::create_directories(fs::path(m_root) / "rxe3" / "ports" / "1");
    port("rxe4", 1, "garbage", "fast", "");

    auto ports = list_ports(m_root);
    ASSERT_EQ(ports.size(), 2u);
    for (const auto &p : ports) {
        EXPECT_EQ(p.state, 0) << p.device;
        EXPECT_FALSE(p.active()) << p.device;
        EXPECT_DOUBLE_EQ(p.rate_gbps, 0.0) << p.device;
        EXPECT_TRUE(p.link_layer.empty()) << p.device;
    }
}

TEST_F(devices_fixture, skips_names_no_agent_could_carry)
{
    port("bad name", 1, "4: ACTIVE");
    port(std::string(64, 'x'), 1, "4: ACTIVE");
    fs::create_directories(fs::path(m_root) / "rxe5" / "ports" / "0");
    fs::create_directories(fs::path(m_root) / "rxe5" / "ports" / "one");
    port("rxe5", 1, "4: ACTIVE");

    auto ports = list_ports(m_root);
    ASSERT_EQ(ports.size(), 1u);
    EXPECT_EQ(ports[0].device, "rxe5");
    EXPECT_EQ(ports[0].port, 1);
}

TEST_F(devices_fixture, no_root_no_ports)
{
    EXPECT_TRUE(list_ports(m_root + "/nosuch").empty());
}

/* The agent's device: the transport decides before anything else. */
TEST(check_transport,
     infiniband_transport_serves_and_iwarp_is_refused_with_the_reason)
{
    EXPECT_TRUE(rvt::agent::check_transport(IBV_TRANSPORT_IB));
    const auto iwarp = rvt::agent::check_transport(IBV_TRANSPORT_IWARP);
    ASSERT_FALSE(iwarp);
    EXPECT_NE(iwarp.error().find("iWARP"), std::string::npos) << iwarp.error();
    EXPECT_NE(iwarp.error().find("no UD QPs"), std::string::npos);
    EXPECT_NE(iwarp.error().find("no immediate data"), std::string::npos);
    const auto other = rvt::agent::check_transport(IBV_TRANSPORT_USNIC);
    ASSERT_FALSE(other);
    EXPECT_NE(other.error().find("transport type " +
                                 std::to_string(IBV_TRANSPORT_USNIC)),
              std::string::npos)
            << other.error();
}
