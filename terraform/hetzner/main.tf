# N volley workers on Hetzner Cloud, the same fleet as terraform/aws: a private network, a
# firewall that admits the worker port from the controller's address alone, and servers whose
# cloud-init installs the hardened unit. Same variables and outputs as the AWS module.

locals {
  machine_type = coalesce(var.machine_type, "cpx31")
  image        = coalesce(var.image, "debian-12")
  location     = coalesce(var.zone, "fsn1")
  admin_cidrs  = length(var.admin_cidrs) > 0 ? var.admin_cidrs : ["${var.controller_ip}/32"]
  # Two UUIDs (122 random bits each, from a CSPRNG): no provider beyond hcloud is needed for it.
  token = var.token != "" ? var.token : terraform_data.token.output
  cloud_init = templatefile("${path.module}/../templates/worker-cloud-init.yaml.tftpl", {
    unit   = filebase64("${path.module}/../../deploy/systemd/volley-worker.service")
    sysctl = filebase64("${path.module}/../../deploy/systemd/volley-worker.sysctl.conf")
    token  = base64encode(local.token)
    port   = var.worker_port
    url    = var.volley_url
    sha256 = var.volley_sha256
  })
}

# Made once; ignore_changes keeps uuid() from making a new token at every plan.
resource "terraform_data" "token" {
  input = "${replace(uuid(), "-", "")}${replace(uuid(), "-", "")}"
  lifecycle {
    ignore_changes = [input]
  }
}

resource "hcloud_network" "fleet" {
  name     = "${var.name}-fleet"
  ip_range = var.network_cidr
}

resource "hcloud_network_subnet" "workers" {
  network_id   = hcloud_network.fleet.id
  type         = "cloud"
  network_zone = "eu-central"
  ip_range     = var.subnet_cidr
}

resource "hcloud_firewall" "workers" {
  name = "${var.name}-workers"

  rule {
    description = "volley worker port, from the controller"
    direction   = "in"
    protocol    = "tcp"
    port        = tostring(var.worker_port)
    source_ips  = ["${var.controller_ip}/32"]
  }

  rule {
    description = "SSH, for Ansible"
    direction   = "in"
    protocol    = "tcp"
    port        = "22"
    source_ips  = local.admin_cidrs
  }
}

resource "hcloud_ssh_key" "admin" {
  name       = "${var.name}-admin"
  public_key = var.ssh_public_key
}

resource "hcloud_server" "worker" {
  count        = var.worker_count
  name         = "${var.name}-worker-${count.index}"
  server_type  = local.machine_type
  image        = local.image
  location     = local.location
  ssh_keys     = [hcloud_ssh_key.admin.id]
  firewall_ids = [hcloud_firewall.workers.id]
  user_data    = local.cloud_init

  public_net {
    ipv4_enabled = var.public_ips
    ipv6_enabled = var.public_ips
  }

  network {
    network_id = hcloud_network.fleet.id
    ip         = cidrhost(var.subnet_cidr, 10 + count.index)
  }

  depends_on = [hcloud_network_subnet.workers]
}
