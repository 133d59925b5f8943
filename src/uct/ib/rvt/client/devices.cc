/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/client/devices.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>

namespace rvt::client {

namespace fs = std::filesystem;

namespace {

/* The first line of a sysfs attribute, or empty when it cannot be read. */
std::string read_line(const fs::path &path)
{
    std::ifstream in(path);
    std::string line;
    if (in) {
        std::getline(in, line);
    }
    while (!line.empty() &&
           std::isspace(static_cast<unsigned char>(line.back()))) {
        line.pop_back();
    }
    return line;
}

/* Names the agent's socket could carry (runtime_dir.h). */
bool usable_device_name(std::string_view name)
{
    if (name.empty() || name.size() > 63) {
        return false;
    }
    return std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
               c == '.' || c == '-';
    });
}

/* The names in dir; empty when it cannot be read (no exceptions: sysfs
 * entries come and go). */
std::vector<std::string> entries(const fs::path &dir)
{
    std::vector<std::string> names;
    std::error_code ec;
    fs::directory_iterator it(dir, ec), end;
    while (!ec && it != end) {
        names.push_back(it->path().filename().string());
        it.increment(ec);
    }
    return names;
}

std::optional<int> parse_port_number(std::string_view name)
{
    int n        = 0;
    auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
    if (ec != std::errc() || p != name.data() + name.size() || n < 1 ||
        n > 255) {
        return std::nullopt;
    }
    return n;
}

port_info
read_port(const fs::path &dev_dir, const std::string &device, int port)
{
    const fs::path dir = dev_dir / "ports" / std::to_string(port);
    port_info info{device, port, 0, {}, {}, 0.0, {}};
    if (auto st = parse_port_state(read_line(dir / "state"))) {
        info.state      = st->first;
        info.state_name = st->second;
    }
    info.link_layer        = read_line(dir / "link_layer");
    const std::string rate = read_line(dir / "rate");
    info.rate_gbps         = parse_port_rate(rate).value_or(0.0);
    info.speed             = parse_port_speed(rate);
    return info;
}

/* Ports of one device, ascending. */
void append_ports(const fs::path &dev_dir, const std::string &device,
                  std::vector<port_info> &out)
{
    std::vector<int> ports;
    for (const auto &name : entries(dev_dir / "ports")) {
        if (auto n = parse_port_number(name)) {
            ports.push_back(*n);
        }
    }
    std::sort(ports.begin(), ports.end());
    for (int port : ports) {
        out.push_back(read_port(dev_dir, device, port));
    }
}

std::mutex g_root_lock;
std::string g_root; /* empty: sysfs_infiniband */

} // namespace

std::string devices_root()
{
    std::lock_guard g(g_root_lock);
    return g_root.empty() ? sysfs_infiniband : g_root;
}

void set_devices_root(std::string root)
{
    std::lock_guard g(g_root_lock);
    g_root = std::move(root);
}

std::optional<std::pair<int, std::string>>
parse_port_state(std::string_view text)
{
    const auto colon = text.find(':');
    if (colon == std::string_view::npos || colon == 0) {
        return std::nullopt;
    }
    int n        = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + colon, n);
    if (ec != std::errc() || p != text.data() + colon || n < 0) {
        return std::nullopt;
    }
    std::string_view name = text.substr(colon + 1);
    while (!name.empty() && name.front() == ' ') {
        name.remove_prefix(1);
    }
    return std::pair<int, std::string>{n, std::string(name)};
}

std::optional<double> parse_port_rate(std::string_view text)
{
    /* "<number> Gb/sec ...": strtod needs a terminated string */
    const std::string s(text);
    const char *begin = s.c_str();
    char *end         = nullptr;
    const double v    = std::strtod(begin, &end);
    if (end == begin || v <= 0.0) {
        return std::nullopt;
    }
    std::string_view unit(end);
    while (!unit.empty() && unit.front() == ' ') {
        unit.remove_prefix(1);
    }
    if (unit.substr(0, 6) != "Gb/sec") {
        return std::nullopt;
    }
    return v;
}

std::string parse_port_speed(std::string_view text)
{
    /* "(<width>X <speed>)" at the end */
    const auto open = text.rfind('(');
    const auto x   = text.find("X ", open == std::string_view::npos ? 0 : open);
    const auto end = text.rfind(')');
    if (open == std::string_view::npos || x == std::string_view::npos ||
        end == std::string_view::npos || end < x + 2) {
        return {};
    }
    return std::string(text.substr(x + 2, end - (x + 2)));
}

double device_latency(const port_info &port)
{
    struct lane {
        std::string_view speed;
        double latency;
    };
    static constexpr lane table[] = {
            {"SDR", 5000e-9},  {"DDR", 2500e-9}, {"QDR", 1300e-9},
            {"FDR10", 700e-9}, {"FDR", 700e-9},  {"EDR", 600e-9},
            {"HDR", 600e-9},   {"NDR", 600e-9},  {"XDR", 600e-9},
    };
    double latency = table[0].latency;
    for (const lane &l : table) {
        if (port.speed == l.speed) {
            latency = l.latency;
        }
    }
    if (port.link_layer == "Ethernet") {
        latency += 200e-9;
    }
    return latency;
}

double device_data_rate(const port_info &port)
{
    const double rate    = port.rate_gbps > 0 ? port.rate_gbps : 10.0;
    const bool eight_ten = port.speed == "SDR" || port.speed == "DDR" ||
                           (port.speed == "QDR" &&
                            port.link_layer != "Ethernet");
    return rate * 1e9 / 8 * (eight_ten ? 0.8 : 1.0);
}

namespace {

/* the data rate less `transport` bytes of header in each path_mtu packet */
double
packet_bandwidth(const port_info &port, uint32_t path_mtu, double transport)
{
    constexpr double bth = 12, icrc = 4, vcrc = 2, delim = 2;
    constexpr double lrh = 8, grh = 40, ethernet = 14;
    const double headers = bth + transport + icrc + vcrc + delim +
                           (port.link_layer == "Ethernet" ? grh + ethernet :
                                                            lrh);
    const double mtu = path_mtu;
    return device_data_rate(port) * mtu / (mtu + headers);
}

constexpr double reth = 16; /* the RDMA header */

} // namespace

double rc_write_bandwidth(const port_info &port, uint32_t path_mtu)
{
    return packet_bandwidth(port, path_mtu, reth);
}

double rdma_stream_bandwidth(const port_info &port, uint32_t path_mtu)
{
    return packet_bandwidth(port, path_mtu, 0);
}

std::vector<port_info> list_ports(const std::string &root)
{
    std::vector<port_info> out;
    std::vector<std::string> devices = entries(root);
    std::erase_if(devices, [](const std::string &name) {
        return !usable_device_name(name);
    });
    std::sort(devices.begin(), devices.end());
    for (const auto &device : devices) {
        append_ports(fs::path(root) / device, device, out);
    }
    return out;
}

std::optional<port_info>
first_active_port(std::string_view device, const std::string &root)
{
    if (!usable_device_name(device)) {
        return std::nullopt;
    }
    std::vector<port_info> ports;
    append_ports(fs::path(root) / std::string(device), std::string(device),
                 ports);
    for (auto &p : ports) {
        if (p.active()) {
            return std::move(p);
        }
    }
    return std::nullopt;
}

} // namespace rvt::client
