//! `holdoff proxy --as-system-proxy`: what to set to make this proxy the system's.
//!
//! Dev Proxy sets the system proxy itself on Windows and macOS, and on Linux only says to
//! configure it. holdoff changes no system setting on any of them (a proxy that dies leaves a
//! system pointing at nothing): it prints the commands, for this OS, with the address filled
//! in.

use std::net::SocketAddr;

/// The lines to print for a proxy listening on `addr`, for the OS holdoff runs on.
pub(super) fn instructions(addr: SocketAddr) -> String {
    instructions_for(std::env::consts::OS, addr)
}

fn instructions_for(os: &str, addr: SocketAddr) -> String {
    let (host, port) = (addr.ip(), addr.port());
    let url = format!("http://{addr}");
    match os {
        "macos" => format!(
            "--as-system-proxy: holdoff does not change system settings; to use it as the \
             system proxy run, for each network service (networksetup -listallnetworkservices):\n\
             \x20 networksetup -setwebproxy \"Wi-Fi\" {host} {port}\n\
             \x20 networksetup -setsecurewebproxy \"Wi-Fi\" {host} {port}\n\
             and to undo it:\n\
             \x20 networksetup -setwebproxystate \"Wi-Fi\" off\n\
             \x20 networksetup -setsecurewebproxystate \"Wi-Fi\" off"
        ),
        "windows" => format!(
            "--as-system-proxy: holdoff does not change system settings; to use it as the \
             system proxy, in Settings > Network & internet > Proxy > Manual proxy setup, set \
             the address {host} and the port {port} (and turn it off again after)"
        ),
        _ => format!(
            "--as-system-proxy: holdoff does not change system settings; configure your \
             system to use the proxy {addr}. In a shell, for the programs started from it:\n\
             \x20 export http_proxy={url} https_proxy={url} HTTP_PROXY={url} HTTPS_PROXY={url}\n\
             On GNOME, for the desktop's programs:\n\
             \x20 gsettings set org.gnome.system.proxy mode 'manual'\n\
             \x20 gsettings set org.gnome.system.proxy.http host '{host}'\n\
             \x20 gsettings set org.gnome.system.proxy.http port {port}\n\
             \x20 gsettings set org.gnome.system.proxy.https host '{host}'\n\
             \x20 gsettings set org.gnome.system.proxy.https port {port}\n\
             and to undo it: gsettings set org.gnome.system.proxy mode 'none'"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod instructions_for {
        use super::*;

        #[test]
        fn name_the_address_in_each_systems_commands() {
            let addr: SocketAddr = "127.0.0.1:8123".parse().unwrap();
            let linux = instructions_for("linux", addr);
            assert!(
                linux.contains("export http_proxy=http://127.0.0.1:8123 https_proxy="),
                "{linux}"
            );
            assert!(
                linux.contains("gsettings set org.gnome.system.proxy.https port 8123"),
                "{linux}"
            );
            let mac = instructions_for("macos", addr);
            assert!(
                mac.contains("networksetup -setsecurewebproxy \"Wi-Fi\" 127.0.0.1 8123"),
                "{mac}"
            );
            let windows = instructions_for("windows", addr);
            assert!(
                windows.contains("the address 127.0.0.1 and the port 8123"),
                "{windows}"
            );
        }
    }
}
