# terraform/aws applied against moto (an AWS API emulator) on loopback, by deploy/test/run.sh.
# The subnet is 198.18.0.0/24, the network the test's containers live on: they take the
# addresses this reports, so nothing is ever sent to an address the emulator made up.

variable "endpoint" {
  description = "moto's URL, http://127.0.0.1:PORT"
  type        = string
}

variable "controller_ip" {
  type = string
}

variable "ssh_public_key" {
  type = string
}

variable "worker_count" {
  type    = number
  default = 3
}

provider "aws" {
  region                      = "us-east-1"
  access_key                  = "moto"
  secret_key                  = "moto"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  skip_region_validation      = true
  endpoints {
    ec2 = var.endpoint
    sts = var.endpoint
    iam = var.endpoint
  }
}

# One of the images moto ships, standing in for a Debian AMI.
data "aws_ami" "any" {
  most_recent = true
  owners      = ["amazon"]
}

module "fleet" {
  source         = "../../../terraform/aws"
  worker_count   = var.worker_count
  controller_ip  = var.controller_ip
  ssh_public_key = var.ssh_public_key
  image          = data.aws_ami.any.id
  network_cidr   = "198.18.0.0/24"
  subnet_cidr    = "198.18.0.0/24"
  public_ips     = false
  zone           = "us-east-1a"
}

output "workers" {
  value = module.fleet.workers
}

output "addresses" {
  value = module.fleet.addresses
}

output "ansible_inventory" {
  value = module.fleet.ansible_inventory
}

output "token" {
  value     = module.fleet.token
  sensitive = true
}
