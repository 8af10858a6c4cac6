# N volley workers on AWS: a VPC with one subnet, a security group that admits the worker port
# from the controller's address alone, and instances whose cloud-init installs the hardened unit.

locals {
  machine_type = coalesce(var.machine_type, "c7i.large")
  admin_cidrs  = length(var.admin_cidrs) > 0 ? var.admin_cidrs : ["${var.controller_ip}/32"]
  # Two UUIDs (122 random bits each, from a CSPRNG): no provider beyond aws is needed for it.
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

resource "aws_vpc" "fleet" {
  cidr_block           = var.network_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true
  tags                 = { Name = "${var.name}-fleet" }
}

resource "aws_subnet" "workers" {
  vpc_id            = aws_vpc.fleet.id
  cidr_block        = var.subnet_cidr
  availability_zone = var.zone
  tags              = { Name = "${var.name}-workers" }
}

resource "aws_internet_gateway" "fleet" {
  vpc_id = aws_vpc.fleet.id
  tags   = { Name = "${var.name}-fleet" }
}

resource "aws_route_table" "workers" {
  vpc_id = aws_vpc.fleet.id
  route {
    cidr_block = "0.0.0.0/0"
    gateway_id = aws_internet_gateway.fleet.id
  }
  tags = { Name = "${var.name}-workers" }
}

resource "aws_route_table_association" "workers" {
  subnet_id      = aws_subnet.workers.id
  route_table_id = aws_route_table.workers.id
}

resource "aws_security_group" "workers" {
  name        = "${var.name}-workers"
  description = "volley workers: the worker port from the controller only, SSH from admins only"
  vpc_id      = aws_vpc.fleet.id
  tags        = { Name = "${var.name}-workers" }
}

resource "aws_vpc_security_group_ingress_rule" "worker_port" {
  security_group_id = aws_security_group.workers.id
  description       = "volley worker port, from the controller"
  ip_protocol       = "tcp"
  from_port         = var.worker_port
  to_port           = var.worker_port
  cidr_ipv4         = "${var.controller_ip}/32"
}

resource "aws_vpc_security_group_ingress_rule" "ssh" {
  for_each          = toset(local.admin_cidrs)
  security_group_id = aws_security_group.workers.id
  description       = "SSH, for Ansible"
  ip_protocol       = "tcp"
  from_port         = 22
  to_port           = 22
  cidr_ipv4         = each.value
}

# Load goes wherever the target is; the worker's --allow-target narrows it.
resource "aws_vpc_security_group_egress_rule" "all" {
  security_group_id = aws_security_group.workers.id
  description       = "load to the targets, packages"
  ip_protocol       = "-1"
  cidr_ipv4         = "0.0.0.0/0"
}

resource "aws_key_pair" "admin" {
  key_name   = "${var.name}-admin"
  public_key = var.ssh_public_key
}

resource "aws_instance" "worker" {
  count                       = var.worker_count
  ami                         = var.image
  instance_type               = local.machine_type
  subnet_id                   = aws_subnet.workers.id
  private_ip                  = cidrhost(var.subnet_cidr, 10 + count.index)
  vpc_security_group_ids      = [aws_security_group.workers.id]
  key_name                    = aws_key_pair.admin.key_name
  associate_public_ip_address = var.public_ips
  user_data_base64            = base64gzip(local.cloud_init)

  # The token is in the user data: only IMDSv2, and not from inside containers (hop limit 1).
  metadata_options {
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  root_block_device {
    volume_type = "gp3"
    volume_size = 16
    encrypted   = true
  }

  tags = { Name = "${var.name}-worker-${count.index}" }

  lifecycle {
    precondition {
      condition     = var.image != null
      error_message = "image: give the AMI id of a Debian 12 (or newer) image in this region."
    }
  }
}
