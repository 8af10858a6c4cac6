# The fleet's settings; terraform/aws and terraform/hetzner have the same ones (deploy/test/run.sh checks).

variable "name" {
  description = "Prefix of every resource's name."
  type        = string
  default     = "volley"
}

variable "worker_count" {
  description = "How many worker machines."
  type        = number
  default     = 3
  validation {
    condition     = var.worker_count >= 1 && var.worker_count <= 250 && floor(var.worker_count) == var.worker_count
    error_message = "worker_count must be a whole number from 1 to 250."
  }
}

variable "controller_ip" {
  description = "The IPv4 address the controller (volley --workers) connects from: the only address the worker port admits."
  type        = string
  validation {
    condition     = can(cidrhost("${var.controller_ip}/32", 0)) && var.controller_ip != "0.0.0.0"
    error_message = "controller_ip must be one IPv4 address (the firewall admits the worker port from it alone), not 0.0.0.0."
  }
}

variable "admin_cidrs" {
  description = "Networks that may reach SSH (for Ansible). Empty: the controller's address only."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for c in var.admin_cidrs : can(cidrhost(c, 0)) && !endswith(c, "/0")])
    error_message = "admin_cidrs must be IPv4 networks, never a /0 such as 0.0.0.0/0."
  }
}

variable "ssh_public_key" {
  description = "The OpenSSH public key Ansible logs in with."
  type        = string
  validation {
    condition     = can(regex("^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp[0-9]+) [A-Za-z0-9+/=]+", var.ssh_public_key))
    error_message = "ssh_public_key must be an OpenSSH public key line."
  }
}

variable "network_cidr" {
  description = "The workers' private network."
  type        = string
  default     = "10.42.0.0/16"
  validation {
    condition     = can(cidrhost(var.network_cidr, 0))
    error_message = "network_cidr must be an IPv4 network."
  }
}

variable "subnet_cidr" {
  description = "The subnet inside network_cidr the workers get their addresses from (from its 10th host on)."
  type        = string
  default     = "10.42.1.0/24"
  validation {
    condition     = can(cidrhost(var.subnet_cidr, 10))
    error_message = "subnet_cidr must be an IPv4 network with room for at least 10 hosts."
  }
}

variable "public_ips" {
  description = "Give the workers public addresses, and list those in the outputs (a controller outside the network needs them)."
  type        = bool
  default     = true
}

variable "worker_port" {
  description = "The port volley worker listens on."
  type        = number
  default     = 7700
}

variable "machine_type" {
  description = "Instance type (AWS) or server type (Hetzner). Null: c7i.large on AWS, cpx31 on Hetzner."
  type        = string
  default     = null
}

variable "image" {
  description = "The machine image: an AMI id on AWS (Debian 12 or newer; required there), an image name on Hetzner (null: debian-12)."
  type        = string
  default     = null
}

variable "zone" {
  description = "Availability zone (AWS) or location (Hetzner). Null: the provider's choice on AWS, fsn1 on Hetzner."
  type        = string
  default     = null
}

variable "volley_url" {
  description = "An https URL of the volley binary that cloud-init installs. Empty: cloud-init installs nothing and Ansible's install playbook does it."
  type        = string
  default     = ""
  validation {
    condition     = var.volley_url == "" || startswith(var.volley_url, "https://")
    error_message = "volley_url must be an https:// URL, or empty."
  }
}

variable "volley_sha256" {
  description = "The SHA-256 of the binary at volley_url; cloud-init refuses anything else."
  type        = string
  default     = ""
  validation {
    condition     = var.volley_sha256 == "" || can(regex("^[0-9a-f]{64}$", var.volley_sha256))
    error_message = "volley_sha256 must be 64 lowercase hex digits."
  }
}

variable "token" {
  description = "The workers' bearer token. Empty: one is generated (see the token output)."
  type        = string
  default     = ""
  sensitive   = true
}
